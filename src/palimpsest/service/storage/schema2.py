"""Reading a store of schema 2 (one history, before it was kept compact), for
``pal admin migrate``: the same changesets, refs, bodies and keys as now, kept as plain JSON
under hex digests and text memory ids. The database is only read; the changesets and bodies
carry over unchanged (their ids stay), and every projection is derived again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from palimpsest.service.model import Changeset
from palimpsest.service.storage.schema import load
from palimpsest.service.storage.schema1 import Schema1

# Tables carried over row for row (same columns in schema 3); ``sessions`` (the review desk's
# sign-ins) exists in schema-2 stores written since the desk kept them in the store.
PLAIN = ("members", "groups", "memberships", "credentials", "memories", "grants", "files",
         "docs", "mg_nonces", "mg_settings", "mg_reviews", "mg_advances", "mg_manifests",
         "mg_conflicts", "sessions")


class Schema2(Schema1):
    """A schema-2 database, read-only."""

    SCHEMA = "2"

    def history(self) -> Iterator[Changeset]:
        """Every changeset in append order (parents first), with the payloads it keeps apart
        (an erased one's is ``None``); the caller verifies each."""
        for r in self._db.execute("SELECT id, memory_id, doc FROM changesets ORDER BY seq"
                                  ).fetchall():
            data = load(r["doc"])
            data["changeset_id"], data["project_id"] = r["id"], r["memory_id"]
            payloads = {}
            for o in data["ops"]:
                found = self.stored(o["payload_digest"]) if "payload_digest" in o else None
                if found is not None:
                    payloads[o["payload_digest"]] = load(found)
            yield Changeset.from_document(data, payloads)

    def stored(self, digest: str) -> bytes | None:
        """The bytes kept under ``digest`` (a record body or a payload), ``None`` once
        erased."""
        r = self._db.execute("SELECT data FROM bodies WHERE digest=?", (digest,)).fetchone()
        return bytes(r["data"]) if r is not None else None

    def proposals_with_seq(self) -> list[tuple[dict[str, Any], int]]:
        """Every proposal document with its sequence number, in order."""
        return [(load(r[0]), int(r[1])) for r in self._db.execute(
            "SELECT doc, seq FROM mg_proposals ORDER BY seq").fetchall()]


__all__ = ["PLAIN", "Schema2"]
