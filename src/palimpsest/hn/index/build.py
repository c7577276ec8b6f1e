"""A full build of the private index into a new file, streaming: memory stays flat.

Three passes, none holding every memory: (1) every stream is verified in order
(:func:`palimpsest.hn.store.verify_walk`) and its entries and envelopes go straight into the new
file, keeping only each memory's relationship fields (:class:`palimpsest.hn.projection.Stub`);
(2) the relationship pass runs over those (:func:`palimpsest.hn.projection.relate`); (3) the
record and supersede envelopes are read back in ID order, batch by batch, and projected one row
at a time (:class:`palimpsest.hn.projection.RowJudge`) at no query commit — the same rows
:func:`palimpsest.hn.projection.project` gives for the whole set.  Nothing of the new file is
trusted until it is complete: a failure anywhere discards it.

Used by a rebuild (the new file replaces the old one) and by verify (it is compared with the old
one, then deleted).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from palimpsest.hn import store
from palimpsest.hn.envelope import VerifiedMemory
from palimpsest.hn.index.schema import SCHEMA, Progress
from palimpsest.hn.index.write import (
    NEUTRAL,
    RowWriter,
    store_entries,
    store_envelopes,
    verified_envelope,
    write_meta,
)
from palimpsest.hn.projection import RowJudge, Stub, relate, stub

if TYPE_CHECKING:
    import pygit2

BATCH = 1000  # memories per write; rows per projection batch


def build(
    repo: pygit2.Repository,
    conn: sqlite3.Connection,
    key: bytes,
    refs: Sequence[store.MemoryRef],
    *,
    progress: Progress | None = None,
) -> int:
    """Fill an empty index file (``conn``, no open transaction) from Git; return the number of
    rows.  The caller commits.

    Raises:
        InvalidInput: a memory stream is invalid (fail closed: nothing of the file is used).
    """
    for statement in SCHEMA:
        conn.execute(statement)
    stubs = _store_streams(repo, conn, refs, progress)
    relations = relate(stubs.values())
    probe = store.RepoProbe(repo)
    judge = RowJudge(probe, at_commit=None, policy=NEUTRAL)
    writer = RowWriter(conn, key, probe, fresh=True)
    total = sum(1 for s in stubs.values() if s.operation in ("record", "supersede"))
    done = 0
    cursor = conn.execute(
        "SELECT id, commit_id, ref, payload, signature FROM envelopes"
        " WHERE operation IN ('record', 'supersede') ORDER BY id"
    )
    while batch := cursor.fetchmany(BATCH):
        memories = [
            verified_envelope(str(m), str(c), str(r), bytes(p), str(s), check=False)
            for m, c, r, p, s in batch
        ]
        writer.write(judge.row(memory, relations, stubs) for memory in memories)
        done += len(memories)
        if progress is not None:
            progress("Projecting memories", done, total)
    writer.finish()
    write_meta(conn, refs, writer.added)
    return writer.added


def _store_streams(
    repo: pygit2.Repository,
    conn: sqlite3.Connection,
    refs: Sequence[store.MemoryRef],
    progress: Progress | None,
) -> dict[str, Stub]:
    """Verify every stream into ``entries`` and ``envelopes``; the stubs of every memory."""
    walk = store.walk_streams(repo, refs)
    stubs: dict[str, Stub] = {}
    shared: dict[str, str] = {}  # one string object per actor and stream, not one per memory
    pending: list[VerifiedMemory] = []
    done = 0

    def flush() -> None:
        by_ref: dict[str, list[VerifiedMemory]] = {}
        for memory in pending:
            by_ref.setdefault(memory.ref, []).append(memory)
        for name, memories in by_ref.items():
            _entries(conn, name, memories)
        store_envelopes(conn, pending)
        pending.clear()

    for memory in store.verify_walk(repo, walk):
        if memory.memory_id not in stubs:
            one = stub(memory)
            stubs[memory.memory_id] = Stub(
                one.memory_id, shared.setdefault(one.stream, one.stream),
                shared.setdefault(one.actor, one.actor), one.operation, one.target,
            )  # fmt: skip
        pending.append(memory)
        done += 1
        if len(pending) >= BATCH:
            flush()
            if progress is not None:
                progress("Verifying memories", done, walk.total)
    flush()
    if progress is not None:
        progress("Verifying memories", done, walk.total)
    heads = {ref.name: ref for ref in refs}
    for ref, _chain in walk.chains:
        store_entries(conn, heads[ref.name], (), replace_all=False)
    return stubs


def _entries(conn: sqlite3.Connection, ref: str, memories: list[VerifiedMemory]) -> None:
    conn.executemany(
        "INSERT INTO entries VALUES (?, ?, ?, ?)",
        [(ref, m.envelope.sequence, m.memory_id, m.commit) for m in memories],
    )


__all__ = ["BATCH", "Progress", "build"]
