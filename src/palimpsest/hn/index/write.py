"""Writing the private index: sources, envelopes, rows with their keys, anchors, postings and
per-class totals, and the re-projection of the rows that new memories — or a Git object that
has since arrived — can change (see :mod:`palimpsest.hn.index.core` for the rule and the
property test that checks it).

Rows are projected without a query commit (each at its own anchor commit, no subject, no path,
no policy): what a row stores is the same whatever a recall asks.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from palimpsest.errors import InvalidInput
from palimpsest.hn.envelope import VerifiedMemory, decode_envelope, memory_id, verify_signature
from palimpsest.hn.index.rows import posting_terms, row_values
from palimpsest.hn.index.schema import (
    DESCENDANTS,
    EXACT,
    FORMAT,
    GROUP_SQL,
    INSERT_KEY,
    INSERT_ROW,
    MAX_SLOT,
    IndexState,
    StaleIndex,
    heads_digest,
    key_values,
    mac_of,
)
from palimpsest.hn.policy import PolicyContext, policy_context
from palimpsest.hn.projection import Probe, Row, project
from palimpsest.hn.store import MemoryRef

# Rows store no trust: any policy projects the same rows otherwise.
NEUTRAL: PolicyContext = policy_context("", None)


def write_meta(conn: sqlite3.Connection, refs: Sequence[MemoryRef], records: int) -> IndexState:
    """Record the format, the row count and a digest of the source heads (each head is in
    ``sources``)."""
    pairs = tuple((r.name, r.head) for r in refs)
    values = {"format": FORMAT, "records": str(records), "heads": heads_digest(pairs)}
    conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", sorted(values.items()))
    return IndexState(pairs, records)


def store_entries(
    conn: sqlite3.Connection,
    ref: MemoryRef,
    stream: Sequence[VerifiedMemory],
    *,
    replace_all: bool,
) -> None:
    """Record a stream's entries (all of them, or the ones it gained) and its new head."""
    if replace_all:
        conn.execute("DELETE FROM entries WHERE ref = ?", (ref.name,))
    conn.executemany(
        "INSERT INTO entries VALUES (?, ?, ?, ?)",
        [(ref.name, m.envelope.sequence, m.memory_id, m.commit) for m in stream],
    )
    # Sequences are 1..n without gaps (verified), so the largest is the count: O(log n).
    top = conn.execute("SELECT max(sequence) FROM entries WHERE ref = ?", (ref.name,)).fetchone()
    total = int(top[0] or 0)
    last = stream[-1].memory_id if stream else ""
    if not stream:
        row = conn.execute(
            "SELECT id FROM entries WHERE ref = ? ORDER BY sequence DESC LIMIT 1", (ref.name,)
        ).fetchone()
        last = str(row[0]) if row else ""
    conn.execute(
        "INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?)", (ref.name, ref.head, total, last)
    )


# One memory reached from several refs is stored once: under the smallest commit ID, and among
# those the smallest ref name, whatever order the refs were read in.
_UPSERT_ENVELOPE = (
    "INSERT INTO envelopes VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
    " commit_id = excluded.commit_id, ref = excluded.ref WHERE excluded.commit_id < commit_id"
    " OR (excluded.commit_id = commit_id AND excluded.ref < ref)"
)


def store_envelopes(conn: sqlite3.Connection, memories: Iterable[VerifiedMemory]) -> list[str]:
    """Insert envelopes not yet stored (see :data:`_UPSERT_ENVELOPE`); return the new IDs."""
    batch = [
        (m.memory_id, m.commit, m.ref, m.envelope.operation, m.envelope.target, m.payload,
         m.signature)
        for m in memories
    ]  # fmt: skip
    if not batch:
        return []
    known = _ids(conn, "SELECT id FROM envelopes WHERE id IN ({marks})", [b[0] for b in batch])
    conn.executemany(_UPSERT_ENVELOPE, batch)
    return list(dict.fromkeys(b[0] for b in batch if b[0] not in known))


def _ids(conn: sqlite3.Connection, sql: str, args: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(args), 500):
        chunk = list(args[start : start + 500])
        marks = ",".join("?" * len(chunk))
        found.update(str(r[0]) for r in conn.execute(sql.format(marks=marks), chunk))
    return found


class RowWriter:
    """Writes rows (new or re-projected) in the caller's transaction, keeping the row keys, the
    anchors and actors tables, the postings, the watch lists of missing objects and the
    per-class totals in step; :meth:`finish` settles the totals and anchor counts."""

    def __init__(
        self, conn: sqlite3.Connection, key: bytes, probe: Probe, *, fresh: bool
    ) -> None:
        self._conn = conn
        self._key = key
        self._probe = probe
        self._fresh = fresh
        self._slots = {str(a): int(s) for s, a in conn.execute("SELECT slot, actor FROM actors")}
        self._anchors = {
            str(c): (int(a), str(s)) for a, c, s in conn.execute(
                "SELECT aid, commit_id, state FROM anchors")
        }  # fmt: skip
        top = conn.execute("SELECT max(rid) FROM row_keys").fetchone()
        self._next_rid = int(top[0] or 0) + 1
        self._groups: set[tuple[int, int, int]] = set()
        self._aids: set[int] = set()
        self.added = 0

    def _slot(self, actor: str) -> int:
        slot = self._slots.get(actor)
        if slot is None:
            slot = len(self._slots)
            if slot > MAX_SLOT:
                raise InvalidInput("too many actors for the memory index", code="index-limit")
            self._slots[actor] = slot
            self._conn.execute("INSERT INTO actors VALUES (?, ?)", (slot, actor))
        return slot

    def _aid(self, row: Row) -> int:
        commit = row.anchor.commit
        missing = any(d.kind == "anchor-commit" for d in row.dependencies)
        known = self._anchors.get(commit)
        if known is None:
            aid = len(self._anchors) + 1
            state = "missing" if missing else self._probe.commit_state(commit)
            self._anchors[commit] = (aid, state)
            self._conn.execute(
                "INSERT INTO anchors VALUES (?, ?, ?, 0, 0, '')", (aid, commit, state)
            )
            self._aids.add(aid)
            return aid
        aid, state = known
        if missing and state != "missing":  # the commit went away: probe it again on open
            self._anchors[commit] = (aid, "missing")
            self._conn.execute("UPDATE anchors SET state = 'missing' WHERE aid = ?", (aid,))
            self._aids.add(aid)
        return aid

    def write(self, rows: Iterable[Row]) -> None:
        """Write (or rewrite) rows.  A rewritten row keeps its ``rid`` and its words (they come
        from the signed record and anchor, which never change); its document moves when its
        eligibility, lifecycle rank or class do."""
        conn = self._conn
        rows_batch: list[tuple[Any, ...]] = []
        keys_batch: list[tuple[Any, ...]] = []
        terms_batch: list[tuple[int, str]] = []
        refs_batch: list[tuple[str, str]] = []
        missing_batch: list[tuple[str, str]] = []
        for row in rows:
            values = row_values(row)
            slot, aid = self._slot(row.actor), self._aid(row)
            old = None
            if not self._fresh:
                old = conn.execute(
                    "SELECT doc, rid, eligible, mode, lifecycle_rank, cls, aid FROM row_keys"
                    " WHERE id = ?",
                    (row.id,),
                ).fetchone()
                for table in ("rows", "evidence_refs", "missing_objects"):
                    conn.execute(f"DELETE FROM {table} WHERE id = ?", (row.id,))  # noqa: S608
            if old is None:
                self.added += 1
                keys = key_values(values, slot, aid, self._next_rid)
                self._next_rid += 1
                terms_batch.append((keys[0], posting_terms(row)))
            else:
                if old[2]:
                    self._groups.add((int(old[3]), int(old[4]), int(old[5])))
                self._aids.add(int(old[6]))
                keys = key_values(values, slot, aid, int(old[1]))
                conn.execute("DELETE FROM row_keys WHERE doc = ?", (old[0],))
                if keys[0] != old[0]:
                    # Same words, another document ID: a contentless table forgets a document
                    # given its exact words.
                    words = posting_terms(row)
                    conn.execute(
                        "INSERT INTO terms (terms, rowid, words) VALUES ('delete', ?, ?)",
                        (old[0], words),
                    )
                    terms_batch.append((keys[0], words))
            if keys[3]:
                self._groups.add((int(keys[4]), int(keys[6]), int(keys[8])))
            self._aids.add(aid)
            rows_batch.append((*values, mac_of(self._key, values)))
            keys_batch.append(keys)
            refs_batch += [
                (e[len("memory:") :], row.id)
                for e in row.record.evidence
                if e.startswith("memory:")
            ]
            missing_batch += [
                (d.requested, row.id)
                for d in row.evidence_details
                if d.type == "git" and d.status == "missing"
            ]
        conn.executemany(INSERT_ROW, rows_batch)
        conn.executemany(INSERT_KEY, keys_batch)
        conn.executemany("INSERT INTO terms (rowid, words) VALUES (?, ?)", terms_batch)
        conn.executemany("INSERT OR IGNORE INTO evidence_refs VALUES (?, ?)", refs_batch)
        conn.executemany("INSERT OR IGNORE INTO missing_objects VALUES (?, ?)", missing_batch)

    def finish(self) -> None:
        """Recompute the totals of every class and the counts of every anchor rows were
        written in (all of them after a fresh build)."""
        conn, key = self._conn, self._key
        if self._fresh:
            conn.execute("DELETE FROM groups")
            found = conn.execute(GROUP_SQL + " GROUP BY 1, 2, 3").fetchall()
            conn.execute("INSERT INTO terms (terms) VALUES ('optimize')")  # one segment to read
            aids = [int(a) for (a,) in conn.execute("SELECT aid FROM anchors")]
        else:
            found = []
            for group in sorted(self._groups):
                conn.execute(
                    "DELETE FROM groups WHERE mode = ? AND lifecycle_rank = ? AND cls = ?", group
                )
                found += conn.execute(
                    GROUP_SQL + " AND mode = ? AND lifecycle_rank = ? AND cls = ? GROUP BY 1, 2, 3",
                    group,
                ).fetchall()
            aids = sorted(self._aids)
        conn.executemany(
            "INSERT INTO groups VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(*values, mac_of(key, values)) for values in found],
        )
        for aid in aids:
            refresh_anchor(conn, key, aid)
        self._groups.clear()
        self._aids.clear()


def refresh_anchor(conn: sqlite3.Connection, key: bytes, aid: int, state: str = "") -> None:
    """Recount an anchor's eligible rows per mode (and set its state) and re-sign its row."""
    counts = dict.fromkeys((DESCENDANTS, EXACT), 0)
    for mode, n in conn.execute(
        "SELECT mode, count(*) FROM row_keys WHERE aid = ? AND eligible = 1 GROUP BY mode", (aid,)
    ):
        counts[int(mode)] = int(n)
    found = conn.execute("SELECT commit_id, state FROM anchors WHERE aid = ?", (aid,)).fetchone()
    values = (aid, str(found[0]), state or str(found[1]), counts[DESCENDANTS], counts[EXACT])
    conn.execute(
        "UPDATE anchors SET state = ?, n_desc = ?, n_exact = ?, mac = ? WHERE aid = ?",
        (values[2], values[3], values[4], mac_of(key, values), aid),
    )


# ------------------------------------------------------------------------- re-projection


def load_memories(
    conn: sqlite3.Connection, ids: Iterable[str], *, check: bool = True
) -> list[VerifiedMemory]:
    """Stored envelopes of ``ids`` (unknown IDs are skipped).

    With ``check`` (the default) each is verified again — hash, strict decoding, signature —
    since the file may have been edited; without it (only for a file this process wrote
    moments ago) the bytes are just decoded.

    Raises:
        StaleIndex: a stored envelope no longer verifies.
    """
    out: list[VerifiedMemory] = []
    wanted = sorted(set(ids))
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for mid, commit, ref, payload, signature in conn.execute(
            f"SELECT id, commit_id, ref, payload, signature FROM envelopes WHERE id IN ({marks})",  # noqa: S608
            chunk,
        ):
            out.append(verified_envelope(str(mid), str(commit), str(ref), bytes(payload),
                                         str(signature), check=check))  # fmt: skip
    return out


def verified_envelope(
    mid: str, commit: str, ref: str, payload: bytes, signature: str, *, check: bool = True
) -> VerifiedMemory:
    """A stored envelope as a verified memory (see :func:`load_memories` for ``check``).

    Raises:
        StaleIndex: the stored envelope does not verify.
    """
    if memory_id(payload) != mid:
        raise StaleIndex("corrupt: stored payload does not match its ID")
    try:
        envelope = decode_envelope(payload)
        if check:
            verify_signature(envelope, payload, signature)
    except InvalidInput as exc:
        raise StaleIndex("corrupt: stored envelope failed verification") from exc
    return VerifiedMemory(mid, commit, payload, envelope, signature, ref)


def affected_by(conn: sqlite3.Connection, new_ids: Sequence[str]) -> set[str]:
    """The stored rows whose answers new memories can change: the new rows, the targets of
    new relationships, and rows whose own relationship or memory evidence names a new one."""
    new = load_memories(conn, new_ids)
    affected = {m.memory_id for m in new if m.envelope.operation in ("record", "supersede")}
    affected |= {m.envelope.target for m in new if m.envelope.target}
    affected |= _ids(conn, "SELECT id FROM envelopes WHERE target IN ({marks})", new_ids)
    affected |= _ids(conn, "SELECT id FROM evidence_refs WHERE memory IN ({marks})", new_ids)
    return affected


def reproject(
    conn: sqlite3.Connection, writer: RowWriter, probe: Probe, ids: Iterable[str]
) -> int:
    """Project the rows of ``ids`` again from stored envelopes (exactly the memories their
    answers depend on: themselves, everything targeting them, their own targets and the
    memories their evidence names) and write them; return how many were written."""
    affected = _ids(
        conn,
        "SELECT id FROM envelopes WHERE id IN ({marks}) AND operation IN ('record', 'supersede')",
        sorted(set(ids)),
    )
    if not affected:
        return 0
    ordered = sorted(affected)
    needed = set(ordered)
    needed |= _ids(conn, "SELECT id FROM envelopes WHERE target IN ({marks})", ordered)
    needed |= _ids(
        conn, "SELECT target FROM envelopes WHERE id IN ({marks}) AND target != ''", ordered
    )
    subset = load_memories(conn, needed)
    cited = {
        e[len("memory:") :]
        for m in subset
        if m.memory_id in affected and m.envelope.record is not None
        for e in m.envelope.record.evidence
        if e.startswith("memory:")
    }
    extra = _ids(conn, "SELECT id FROM envelopes WHERE id IN ({marks})", sorted(cited - needed))
    subset += load_memories(conn, extra)
    projection = project(subset, probe, at_commit=None, policy=NEUTRAL)
    rows = [row for row in projection.rows if row.id in affected]
    writer.write(rows)
    return len(rows)


def arrived(conn: sqlite3.Connection, probe: Probe) -> tuple[list[tuple[int, str]], set[str]]:
    """Objects that were missing when rows were judged and are present now (an anchor commit,
    a ``git:`` evidence object: a fetch may have brought them): the anchors found again (with
    their new state) and the rows to project again.  Reads only."""
    aids: list[tuple[int, str]] = []
    rows: set[str] = set()
    for aid, commit in conn.execute(
        "SELECT aid, commit_id FROM anchors WHERE state = 'missing'"
    ).fetchall():
        state = probe.commit_state(str(commit))
        if state != "missing":
            aids.append((int(aid), state))
            rows.update(str(r) for (r,) in conn.execute(
                "SELECT id FROM row_keys WHERE aid = ?", (aid,)))  # fmt: skip
    for (oid,) in conn.execute("SELECT DISTINCT oid FROM missing_objects").fetchall():
        if probe.object_state(str(oid)) != "missing":
            rows.update(str(r) for (r,) in conn.execute(
                "SELECT id FROM missing_objects WHERE oid = ?", (oid,)))  # fmt: skip
    return aids, rows


__all__ = [
    "NEUTRAL",
    "RowWriter",
    "affected_by",
    "arrived",
    "load_memories",
    "refresh_anchor",
    "reproject",
    "store_entries",
    "store_envelopes",
    "verified_envelope",
    "write_meta",
]
