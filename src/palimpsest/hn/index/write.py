"""Writing the private index: sources, envelopes, rows, postings, per-class totals, and the
incremental re-projection of the rows a few new memories can change (see
:mod:`palimpsest.hn.index` for the rule and the property test that checks it).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import pygit2

from palimpsest.errors import InvalidInput
from palimpsest.hn import store
from palimpsest.hn.envelope import VerifiedMemory, decode_envelope, memory_id, verify_signature
from palimpsest.hn.index.schema import (
    CLASS_OF,
    FORMAT,
    GROUP_SQL,
    INSERT_KEY,
    INSERT_ROW,
    IndexContext,
    IndexState,
    StaleIndex,
    key_values,
    posting_terms,
    row_mac,
    row_values,
    source_fingerprint,
)
from palimpsest.hn.policy import PolicyContext
from palimpsest.hn.projection import Projection, Row, project


def write_meta(
    conn: sqlite3.Connection,
    context: IndexContext,
    policy: PolicyContext,
    refs: Sequence[store.MemoryRef],
    records: int,
) -> IndexState:
    fingerprint = source_fingerprint(policy.digest, ((r.name, r.head) for r in refs))
    values = {
        "format": FORMAT,
        "at_commit": context.at_commit,
        "subject": context.subject,
        "path": context.path,
        "policy_digest": policy.digest,
        "source_fingerprint": fingerprint,
        "records": str(records),
    }
    conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", sorted(values.items()))
    return IndexState(context, policy.digest, fingerprint, records)


def store_entries(
    conn: sqlite3.Connection,
    ref: store.MemoryRef,
    stream: Sequence[VerifiedMemory],
    *,
    replace_all: bool,
) -> None:
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


def store_envelopes(conn: sqlite3.Connection, memories: Iterable[VerifiedMemory]) -> list[str]:
    """Insert envelopes not yet stored (keeping the smallest commit ID); return new IDs."""
    added: list[str] = []
    for m in memories:
        known = conn.execute("SELECT commit_id FROM envelopes WHERE id = ?", (m.memory_id,))
        row = known.fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO envelopes VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    m.memory_id,
                    m.commit,
                    m.ref,
                    m.envelope.operation,
                    m.envelope.target,
                    m.payload,
                    m.signature,
                ),
            )
            added.append(m.memory_id)
        elif m.commit < str(row[0]):
            conn.execute(
                "UPDATE envelopes SET commit_id = ?, ref = ? WHERE id = ?",
                (m.commit, m.ref, m.memory_id),
            )
    return added


def refresh_groups(
    conn: sqlite3.Connection, key: bytes, keys: Iterable[tuple[Any, ...]] | None
) -> None:
    """Recompute the totals of the given classes (all classes when ``keys`` is None)."""
    if keys is None:
        conn.execute("DELETE FROM groups")
        found = conn.execute(GROUP_SQL + " GROUP BY 1, 2, 3, 4").fetchall()
    else:
        found = []
        for group in set(keys):
            conn.execute(
                "DELETE FROM groups WHERE lifecycle_rank = ? AND trust = ? AND kind = ?"
                " AND actor = ?",
                group,
            )
            found += conn.execute(
                GROUP_SQL + " AND lifecycle_rank = ? AND trust = ? AND kind = ? AND actor = ?"
                " GROUP BY 1, 2, 3, 4",
                group,
            ).fetchall()
    conn.executemany(
        "INSERT INTO groups VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(*values, row_mac(key, values)) for values in found],
    )


def _classes(conn: sqlite3.Connection) -> dict[tuple[str, str, str], int]:
    return {
        (str(t), str(k), str(a)): int(c)
        for c, t, k, a in conn.execute("SELECT cls, trust, kind, actor FROM classes")
    }


def _class_id(
    conn: sqlite3.Connection, known: dict[tuple[str, str, str], int], values: Sequence[Any]
) -> int:
    name = (str(values[CLASS_OF[0]]), str(values[CLASS_OF[1]]), str(values[CLASS_OF[2]]))
    cls = known.get(name)
    if cls is None:
        cls = known[name] = max(known.values(), default=0) + 1  # never reused
        conn.execute("INSERT INTO classes VALUES (?, ?, ?, ?)", (cls, *name))
    return cls


def write_rows(conn: sqlite3.Connection, key: bytes, rows: Iterable[Row], *, fresh: bool) -> int:
    """Write (or rewrite) rows, their keys and postings; return how many rows are new.

    A rewritten row keeps its ``rid`` and its ``terms`` words (they derive from the signed
    record, which never changes); its document moves when its eligibility, rank or trust do.
    """
    added = 0
    touched: list[tuple[Any, ...]] = []
    known = _classes(conn)
    rows_batch: list[tuple[Any, ...]] = []
    keys_batch: list[tuple[Any, ...]] = []
    terms_batch: list[tuple[int, str]] = []
    refs_batch: list[tuple[str, str]] = []
    next_rid = 1
    if not fresh:
        top = conn.execute("SELECT max(rid) FROM row_keys").fetchone()
        next_rid = int(top[0] or 0) + 1
    for row in rows:
        values = row_values(row)
        cls = _class_id(conn, known, values)
        old = None
        if not fresh:
            touched += conn.execute(
                "SELECT lifecycle_rank, trust, kind, actor FROM rows WHERE id = ?", (row.id,)
            ).fetchall()
            conn.execute("DELETE FROM rows WHERE id = ?", (row.id,))
            conn.execute("DELETE FROM evidence_refs WHERE id = ?", (row.id,))
            old = conn.execute("SELECT doc, rid FROM row_keys WHERE id = ?", (row.id,)).fetchone()
        if old is None:
            added += 1
            keys = key_values(values, cls, next_rid)
            next_rid += 1
            terms_batch.append((keys[0], posting_terms(row)))
        else:
            keys = key_values(values, cls, int(old[1]))
            conn.execute("DELETE FROM row_keys WHERE doc = ?", (old[0],))
            if keys[0] != old[0]:
                # Same words (they come from the signed record), another document ID: a
                # contentless table forgets a document given its exact words.
                words = posting_terms(row)
                conn.execute(
                    "INSERT INTO terms (terms, rowid, words) VALUES ('delete', ?, ?)",
                    (old[0], words),
                )
                terms_batch.append((keys[0], words))
        touched.append((values[4], row.trust, row.kind, row.actor))
        rows_batch.append((*values, row_mac(key, values)))
        keys_batch.append(keys)
        refs_batch += [
            (e[len("memory:") :], row.id) for e in row.record.evidence if e.startswith("memory:")
        ]
    conn.executemany(INSERT_ROW, rows_batch)
    conn.executemany(INSERT_KEY, keys_batch)
    conn.executemany("INSERT INTO terms (rowid, words) VALUES (?, ?)", terms_batch)
    conn.executemany("INSERT OR IGNORE INTO evidence_refs VALUES (?, ?)", refs_batch)
    if fresh:
        conn.execute("INSERT INTO terms (terms) VALUES ('optimize')")  # one segment to read
    refresh_groups(conn, key, None if fresh else touched)
    return added


# ------------------------------------------------------------------------- incremental


def _ids(conn: sqlite3.Connection, sql: str, args: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(args), 500):
        chunk = list(args[start : start + 500])
        marks = ",".join("?" * len(chunk))
        found.update(str(r[0]) for r in conn.execute(sql.format(marks=marks), chunk))
    return found


def load_memories(conn: sqlite3.Connection, ids: Iterable[str]) -> list[VerifiedMemory]:
    """Re-verify stored envelopes (hash and signature) before they are projected again."""
    out: list[VerifiedMemory] = []
    wanted = sorted(set(ids))
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for mid, commit, ref, payload, signature in conn.execute(
            f"SELECT id, commit_id, ref, payload, signature FROM envelopes WHERE id IN ({marks})",  # noqa: S608
            chunk,
        ):
            data = bytes(payload)
            if memory_id(data) != mid:
                raise StaleIndex("corrupt: stored payload does not match its ID")
            try:
                envelope = decode_envelope(data)
                verify_signature(envelope, data, str(signature))
            except InvalidInput as exc:
                raise StaleIndex("corrupt: stored envelope failed verification") from exc
            out.append(
                VerifiedMemory(str(mid), str(commit), data, envelope, str(signature), str(ref))
            )
    return out


def project_in(
    repo: pygit2.Repository,
    context: IndexContext,
    policy: PolicyContext,
    memories: Sequence[VerifiedMemory],
) -> Projection:
    """Project ``memories`` in the index's context (query commit, subject, path) and policy."""
    return project(
        memories,
        store.RepoProbe(repo),
        at_commit=context.at_commit,
        policy=policy,
        subject=context.subject,
        path=context.path,
    )


def reproject(  # noqa: PLR0917 - internal, one call site
    repo: pygit2.Repository,
    conn: sqlite3.Connection,
    key: bytes,
    context: IndexContext,
    policy: PolicyContext,
    new_ids: Sequence[str],
) -> int:
    """Re-project the rows a set of new memories can change (see the module docstring);
    return how many rows are new."""
    new = load_memories(conn, new_ids)
    affected = {m.memory_id for m in new if m.envelope.operation in ("record", "supersede")}
    affected |= {m.envelope.target for m in new if m.envelope.target}
    # Rows whose own relationship named a memory that just arrived, or cite it as evidence.
    affected |= _ids(conn, "SELECT id FROM envelopes WHERE target IN ({marks})", new_ids)
    affected |= _ids(conn, "SELECT id FROM evidence_refs WHERE memory IN ({marks})", new_ids)
    affected = _ids(
        conn,
        "SELECT id FROM envelopes WHERE id IN ({marks}) AND operation IN ('record', 'supersede')",
        sorted(affected),
    )
    if not affected:
        return 0
    ordered = sorted(affected)
    # The memories those rows depend on: themselves, everything targeting them, their own
    # targets, and the memories their evidence names.
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
    projection = project_in(repo, context, policy, subset)
    rows = [row for row in projection.rows if row.id in affected]
    return write_rows(conn, key, rows, fresh=False)


# ------------------------------------------------------------------------- verify

__all__ = [
    "load_memories",
    "project_in",
    "refresh_groups",
    "reproject",
    "store_entries",
    "store_envelopes",
    "write_meta",
    "write_rows",
]
