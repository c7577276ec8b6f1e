"""What a data directory still holds, as bytes and as the values the store keeps deflated.

The store keeps bodies, payloads and changeset documents deflated (``service/storage/pack.py``),
so a grep of the files alone would not see their words; every such value is read back through
a store and searched too. Erase tests use this to show a text is gone, and that it was there.

On PostgreSQL (``database``) the files searched are the database's own relation files (tables
and indexes, after a checkpoint wrote every page), read from the test cluster's directory:
what a row of SQL no longer shows but a dead row version still holds counts as held. The
write-ahead log is not searched — it keeps every write until its segments are recycled, which
docs/deploy.md says of erase on a server database.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from palimpsest import canonical
from palimpsest.service.storage import open_store


def grep_data_dir(data: Path, *needles: str, database: str | None = None) -> list[str]:
    """Every file of ``data`` (and of the PostgreSQL ``database``) holding one of ``needles``
    (any case), and every stored value holding one once inflated."""
    found = _grep(sorted(p for p in data.rglob("*") if p.is_file()), needles)
    if database is not None:
        found += _grep(_relation_files(database), needles)
        found += _inflated(data, needles, database)
    elif (data / "palimpsest.db").is_file():
        found += _inflated(data, needles, None)
    return found


def _grep(paths: list[Path], needles: tuple[str, ...]) -> list[str]:
    found = []
    for path in paths:
        blob = path.read_bytes().lower()
        found += [f"{path.name}: {n}" for n in needles if n.lower().encode() in blob]
    return found


def _relation_files(database: str) -> list[Path]:
    import psycopg

    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        row = conn.execute("SELECT current_setting('data_directory'), oid FROM pg_database "
                           "WHERE datname = current_database()").fetchone()
    assert row is not None
    return sorted(p for p in (Path(row[0]) / "base" / str(row[1])).iterdir() if p.is_file())


def _digests(data: Path, database: str | None) -> list[str]:
    if database is not None:
        import psycopg

        with psycopg.connect(database) as conn:
            return [bytes(r[0]).hex() for r in conn.execute("SELECT digest FROM bodies")]
    db = sqlite3.connect(data / "palimpsest.db")
    try:
        return [bytes(r[0]).hex() for r in db.execute("SELECT digest FROM bodies")]
    finally:
        db.close()


def _inflated(data: Path, needles: tuple[str, ...], database: str | None) -> list[str]:
    digests = _digests(data, database)
    store = open_store(data, database=database)
    try:
        with store.read():
            values = [(f"body {d[:12]}", store.body(d)) for d in digests]
            values += [(f"changeset {cs.id[:12]}", canonical.encode(cs.to_wire()))
                       for cs in store.changesets()]
    finally:
        store.close()
    return [f"{name}: {n}" for name, value in values if value is not None
            for n in needles if n.lower().encode() in value.lower()]
