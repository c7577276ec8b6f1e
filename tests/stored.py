"""What a data directory still holds, as bytes and as the values the store keeps deflated.

The store keeps bodies, payloads and changeset documents deflated (``service/storage/pack.py``),
so a grep of the files alone would not see their words; every such value is read back through
a store and searched too. Erase tests use this to show a text is gone, and that it was there.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from palimpsest import canonical
from palimpsest.service.storage import open_store


def grep_data_dir(data: Path, *needles: str) -> list[str]:
    """Every file of ``data`` holding one of ``needles`` (any case), and every stored value
    holding one once inflated."""
    found = []
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        blob = path.read_bytes().lower()
        found += [f"{path.name}: {n}" for n in needles if n.lower().encode() in blob]
    if (data / "palimpsest.db").is_file():
        found += _inflated(data, needles)
    return found


def _inflated(data: Path, needles: tuple[str, ...]) -> list[str]:
    db = sqlite3.connect(data / "palimpsest.db")
    try:
        digests = [bytes(r[0]).hex() for r in db.execute("SELECT digest FROM bodies")]
    finally:
        db.close()
    store = open_store(data)
    try:
        with store.read():
            values = [(f"body {d[:12]}", store.body(d)) for d in digests]
            values += [(f"changeset {cs.id[:12]}", canonical.encode(cs.to_wire()))
                       for cs in store.changesets()]
    finally:
        store.close()
    return [f"{name}: {n}" for name, value in values if value is not None
            for n in needles if n.lower().encode() in value.lower()]
