"""The record projection of the embedded store: records, versions, edges, counts and the
FTS5 index — written by the projection of accepted ops, read by get, list, history, graph,
prime and recall. A base of :class:`palimpsest.service.storage.sqlite.SqliteStore`, like
:mod:`.principals` and :mod:`.files`; every row leaves as a value of :mod:`.rows`.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from typing import Any

from palimpsest.search.fts import match_terms
from palimpsest.service.storage.rows import Edge, Hit, RecordHead, StoredVersion
from palimpsest.service.storage.schema import BM25, Statements, load


class RecordRows(Statements):
    """Projection writes and record reads over ``_db``."""

    def _count(self, memory_id: str, delta: int) -> None:
        self._x("INSERT INTO memory_counts VALUES (?, ?) ON CONFLICT(memory_id) DO UPDATE "
                "SET active = active + excluded.active", (memory_id, delta))

    # --- projection -----------------------------------------------------------------------
    def record_head(self, record_id: str) -> RecordHead | None:
        """The current state of a record, ``None`` when the projection holds none."""
        r = self._one("SELECT n, id, memory_id, type, version, status, written_at, body_digest "
                      "FROM records WHERE id=?", (record_id,))
        return RecordHead(*tuple(r)) if r is not None else None

    def project_version(self, *, record_id: str, memory_id: str, version: int, type: str,
                        body_digest: str, written_at: str, written_by: str, extra: str,
                        changeset_id: str, standing: bool, fts_text: str,
                        edges: Sequence[tuple[str, str]] = (), existing: int | None = None,
                        was_forgotten: bool = False, thread: str | None = None,
                        when: str | None = None) -> None:
        """Apply a new version: supersede the previous one, move the record, reindex."""
        if version > 1:
            self._x("UPDATE versions SET invalidated_at=? WHERE record_id=? AND version=?",
                    (written_at, record_id, version - 1))
        self._x("INSERT INTO versions VALUES (?,?,?,?,?,NULL,NULL,?,?,?)",
                (record_id, version, memory_id, body_digest, written_at, written_by, extra,
                 changeset_id))
        if existing is None:
            prev = self._previous_episode(memory_id, None, None, thread) \
                if type == "episode" else None
            context = self._fts_text(prev["n"]) if prev is not None else ""
            cur = self._db.execute(
                "INSERT INTO records (id, memory_id, type, version, status, written_at, "
                "body_digest, standing, context_src, thread, when_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (record_id, memory_id, type, version, "active", written_at, body_digest,
                 int(standing), prev["id"] if prev is not None else None, thread, when))
            n = cur.lastrowid
            self._count(memory_id, 1)
        else:
            n = existing
            if was_forgotten:
                self._count(memory_id, 1)
            self._x("UPDATE records SET version=?, status='active', written_at=?, "
                    "body_digest=?, standing=?, thread=?, when_at=? WHERE n=?",
                    (version, written_at, body_digest, int(standing), thread, when, n))
            row = self._one("SELECT context FROM record_fts WHERE rowid=?", (n,))
            context = row["context"] if row is not None else ""  # kept as first written
            self._x("DELETE FROM record_fts WHERE rowid=?", (n,))
        self._x("INSERT INTO record_fts(rowid, text, context) VALUES (?,?,?)",
                (n, fts_text, context))
        if existing is not None:
            self._x("DELETE FROM edges WHERE src=?", (record_id,))
        for dst, rel in edges:
            self._x("INSERT INTO edges VALUES (?,?,?,?)", (record_id, dst, rel, memory_id))

    def _previous_episode(self, memory_id: str, before: int | None, skip: str | None,
                          thread: str | None) -> sqlite3.Row | None:
        """The episode written last in ``memory_id`` (before row ``before``; not ``skip``),
        or ``None`` when it belongs to another conversation than ``thread``: the words that
        closed the last conversation are not the context of the first turn of a new one."""
        prev = self._one("SELECT n, id, thread FROM records WHERE memory_id=? AND "
                         "type='episode' AND (? IS NULL OR n < ?) AND id IS NOT ? "
                         "ORDER BY n DESC LIMIT 1", (memory_id, before, before, skip))
        if prev is not None and thread is not None and prev["thread"] != thread:
            return None
        return prev

    def _fts_text(self, n: int) -> str:
        row = self._one("SELECT text FROM record_fts WHERE rowid=?", (n,))
        return str(row["text"]) if row is not None else ""

    def project_forget(self, record_id: str, at: str) -> None:
        """Mark the current version forgotten (its index entry stays; reads filter status)."""
        head = self.record_head(record_id)
        if head is None:
            return
        self._x("UPDATE versions SET forgotten_at=? WHERE record_id=? AND version=?",
                (at, record_id, head.version))
        self._x("UPDATE records SET status='forgotten' WHERE n=?", (head.n,))
        if head.status == "active":
            self._count(head.memory_id, -1)

    def project_erase(self, record_id: str) -> list[str]:
        """Remove every version, body and index entry; returns the file sha256s it named."""
        head = self.record_head(record_id)
        digests = [r["body_digest"] for r in self._q(
            "SELECT body_digest FROM versions WHERE record_id=?", (record_id,))]
        for d in digests:
            # content-addressed: the same body may also be another record's (two equal turns)
            self._x("DELETE FROM bodies WHERE digest=? AND NOT EXISTS (SELECT 1 FROM versions "
                    "WHERE body_digest=? AND record_id<>?)", (d, d, record_id))
        self._x("DELETE FROM versions WHERE record_id=?", (record_id,))
        self._x("DELETE FROM edges WHERE src=?", (record_id,))
        if head is not None:
            if head.status == "active":
                self._count(head.memory_id, -1)
            self._x("DELETE FROM record_fts WHERE rowid=?", (head.n,))
            self._x("DELETE FROM records WHERE n=?", (head.n,))
            # Episodes indexed with this record's words as context take the episode before
            # it instead, exactly as a rebuild (where this record is never an episode) does.
            for dep in self._q("SELECT n, memory_id, thread FROM records WHERE context_src=?",
                               (record_id,)):
                prev = self._previous_episode(dep["memory_id"], dep["n"], record_id,
                                              dep["thread"])
                self._x("UPDATE records SET context_src=? WHERE n=?",
                        (prev["id"] if prev is not None else None, dep["n"]))
                self._x("UPDATE record_fts SET context=? WHERE rowid=?",
                        (self._fts_text(prev["n"]) if prev is not None else "", dep["n"]))
        return digests

    def projection_rows(self) -> dict[str, str]:
        """Every projection row (records with their index text, versions, edges, counts) by a
        key that names it, independent of row numbers, so a rebuild can prove it reproduced
        the same state — and say which rows differ when it did not."""
        out: dict[str, str] = {}
        queries = (
            ("record", "SELECT r.id AS k, r.memory_id, r.type, r.version, r.status, "
             "r.written_at, r.body_digest, r.standing, r.context_src, r.thread, r.when_at, "
             "f.text, f.context FROM records r LEFT JOIN record_fts f ON f.rowid = r.n"),
            ("version", "SELECT record_id || '/' || version AS k, * FROM versions"),
            ("edge", "SELECT src || ' ' || rel || ' ' || dst AS k, memory_id, COUNT(*) "
             "FROM edges GROUP BY src, dst, rel, memory_id"),
            ("count", "SELECT memory_id AS k, active FROM memory_counts WHERE active != 0"),
        )
        for name, sql in queries:
            for row in self._db.execute(sql):
                values = tuple(row)
                out[f"{name} {values[0]}"] = hashlib.sha256(
                    repr(values[1:]).encode("utf-8")).hexdigest()[:16]
        return out

    def clear_projections(self) -> None:
        """Drop every projection (records, versions, index) before a rebuild."""
        self._x("DELETE FROM records")
        self._x("DELETE FROM versions")
        self._x("DELETE FROM record_fts")
        self._x("DELETE FROM edges")
        self._x("DELETE FROM memory_counts")

    # --- record reads ---------------------------------------------------------------------
    def version_row(self, record_id: str, version: int) -> StoredVersion | None:
        """One version with its body."""
        return _version_of(self._one("SELECT v.*, b.data FROM versions v LEFT JOIN bodies b ON "
                         "b.digest=v.body_digest WHERE v.record_id=? AND v.version=?",
                         (record_id, version)))

    def versions(self, record_id: str) -> list[StoredVersion]:
        """Every version of a record, oldest first."""
        return _versions(self._q("SELECT v.*, b.data FROM versions v LEFT JOIN bodies b ON "
                       "b.digest=v.body_digest WHERE v.record_id=? ORDER BY v.version",
                       (record_id,)))

    def version_at(self, record_id: str, as_of: str) -> StoredVersion | None:
        """The version current at ``as_of``."""
        return _version_of(self._one("SELECT v.*, b.data FROM versions v LEFT JOIN bodies b ON "
                         "b.digest=v.body_digest WHERE v.record_id=? AND v.written_at<=? "
                         "AND (v.invalidated_at IS NULL OR v.invalidated_at>?) ",
                         (record_id, as_of, as_of)))

    def list_current(self, memory_id: str, statuses: Sequence[str], type: str | None,
                     before: int | None, limit: int) -> list[StoredVersion]:
        """Current records of one memory, newest first, keyset-paginated on ``n``."""
        marks = ",".join("?" * len(statuses))
        sql = (f"SELECT r.n, v.*, b.data FROM records r JOIN versions v ON "  # noqa: S608
               f"v.record_id=r.id AND v.version=r.version LEFT JOIN bodies b ON "
               f"b.digest=v.body_digest WHERE r.memory_id=? AND r.status IN ({marks}) "
               f"AND (? IS NULL OR r.type=?) AND (? IS NULL OR r.n<?) ORDER BY r.n DESC LIMIT ?")
        return _versions(self._q(sql, (memory_id, *statuses, type, type, before, before, limit)))

    def list_at(self, memory_ids: Sequence[str], as_of: str, limit: int,
                offset: int = 0) -> list[StoredVersion]:
        """Versions current at ``as_of`` across memories, newest first."""
        marks = ",".join("?" * len(memory_ids))
        sql = (f"SELECT v.*, b.data FROM versions v LEFT JOIN bodies b ON "  # noqa: S608
               f"b.digest=v.body_digest WHERE v.memory_id IN ({marks}) AND v.written_at<=? "
               f"AND (v.invalidated_at IS NULL OR v.invalidated_at>?) "
               f"ORDER BY v.written_at DESC, v.record_id LIMIT ? OFFSET ?")
        return _versions(self._q(sql, (*memory_ids, as_of, as_of, limit, offset)))

    def current_rows(self, ns: Sequence[int]) -> list[StoredVersion]:
        """Current versions of records by projection row number (order not kept)."""
        if not ns:
            return []
        marks = ",".join("?" * len(ns))
        sql = (f"SELECT r.n, r.status AS rstatus, v.*, b.data FROM records r "  # noqa: S608
               f"JOIN versions v ON v.record_id=r.id AND v.version=r.version LEFT JOIN bodies b "
               f"ON b.digest=v.body_digest WHERE r.n IN ({marks})")
        return _versions(self._q(sql, tuple(ns)))

    def newest_ns(self, memory_ids: Sequence[str], statuses: Sequence[str], limit: int
                  ) -> list[int]:
        """Newest record row numbers across memories (for filter-only recall)."""
        if not memory_ids:
            return []
        m1 = ",".join("?" * len(memory_ids))
        m2 = ",".join("?" * len(statuses))
        sql = (f"SELECT n FROM records WHERE memory_id IN ({m1}) AND status IN ({m2}) "  # noqa: S608
               f"ORDER BY n DESC LIMIT ?")
        return [r["n"] for r in self._q(sql, (*memory_ids, *statuses, limit))]

    def standing_rows(self, memory_id: str) -> list[StoredVersion]:
        """Active standing records of a memory, oldest first."""
        return _versions(self._q("SELECT r.n, v.*, b.data FROM records r JOIN versions v ON "
                       "v.record_id=r.id AND v.version=r.version LEFT JOIN bodies b ON "
                       "b.digest=v.body_digest WHERE r.memory_id=? AND r.standing=1 AND "
                       "r.status='active' ORDER BY r.n", (memory_id,)))

    def search(self, terms: Sequence[str], memory_ids: Sequence[str],  # noqa: PLR0917
               statuses: Sequence[str], types: Sequence[str] | None, limit: int,
               offset: int = 0, bound: int | None = None) -> list[Hit]:
        """Records of ``memory_ids`` holding any of the analysed ``terms``, with a status in
        ``statuses`` (and a type in ``types``), scored by BM25, best first: ``Hit(row number,
        score, analysed text, thread, when)``. With ``bound``, only the newest ``bound``
        matches are scored (terms too common to score every posting within the latency
        budget). The terms come from :mod:`palimpsest.search`; how they are matched is this
        store's business (here a quoted FTS5 MATCH expression that can never inject syntax).

        The FTS index drives the join (CROSS JOIN fixes the order): reach never widens what is
        matched, it only drops rows, and no record outside the reach is ever returned.
        """
        match = match_terms(list(terms), "any")
        if match is None or not memory_ids:
            return []
        m1 = ",".join("?" * len(memory_ids))
        m2 = ",".join("?" * len(statuses))
        where = (f"record_fts MATCH ? AND r.memory_id IN ({m1}) AND r.status IN ({m2})")
        args: list[Any] = [match, *memory_ids, *statuses]
        if types:
            where += f" AND r.type IN ({','.join('?' * len(types))})"
            args.extend(types)
        base = f"FROM record_fts f CROSS JOIN records r ON r.n = f.rowid WHERE {where}"
        # Only row numbers and scores go through the sort; texts are read for the winners.
        if bound is None:
            rows = self._q(f"SELECT f.rowid AS n, f.rank AS s {base} "
                           f"ORDER BY f.rank LIMIT ? OFFSET ?", (*args, limit, offset))
        else:
            rows = self._q(f"SELECT n, s FROM (SELECT f.rowid AS n, {BM25} AS s "  # noqa: S608
                           f"{base} ORDER BY f.rowid DESC LIMIT ?) ORDER BY s LIMIT ?",
                           (*args, bound, limit))
        if not rows:
            return []
        marks = ",".join("?" * len(rows))
        more = {r["n"]: r for r in self._q(
            f"SELECT f.rowid AS n, f.text AS text, r.thread AS thread, r.when_at AS when_at, "  # noqa: S608
            f"p.n AS follows FROM record_fts f JOIN records r ON r.n = f.rowid "
            f"LEFT JOIN records p ON p.id = r.context_src WHERE f.rowid IN ({marks})",
            [r["n"] for r in rows])}
        out = []
        for r in rows:
            m = more.get(r["n"])
            out.append(Hit(int(r["n"]), -float(r["s"]), m["text"] if m else "",
                           m["thread"] if m else None, m["when_at"] if m else None,
                           m["follows"] if m else None))
        return out

    def term_docs(self, terms: Sequence[str],
                  memory_ids: Sequence[str] | None = None) -> dict[str, int]:
        """How many indexed records hold each term. ``memory_ids`` names the reach the counts
        are for; this store answers store-wide counts from its FTS5 vocabulary (they only order
        the terms a recall scores first), a server store may count within the reach."""
        out: dict[str, int] = {}
        for term in terms:
            r = self._one("SELECT doc FROM record_vocab WHERE term=?", (term,))
            out[term] = int(r["doc"]) if r else 0
        return out

    def memory_of_records(self, record_ids: Sequence[str]) -> dict[str, str]:
        """Which memory holds each record id (for references and graph edges)."""
        out: dict[str, str] = {}
        for rid in record_ids:
            r = self._one("SELECT memory_id FROM records WHERE id=?", (rid,))
            if r is not None:
                out[rid] = r["memory_id"]
        return out

    def edges_touching(self, record_ids: Sequence[str]) -> list[Edge]:
        """Edges whose source or target is one of ``record_ids`` (``src, dst, rel,
        memory_id`` = the source's memory)."""
        if not record_ids:
            return []
        marks = ",".join("?" * len(record_ids))
        sql = (f"SELECT DISTINCT src, dst, rel, memory_id FROM edges WHERE src IN ({marks}) "  # noqa: S608
               f"OR dst IN ({marks})")
        return [Edge(*tuple(r)) for r in self._q(sql, (*record_ids, *record_ids))]


def _version_of(r: sqlite3.Row | None) -> StoredVersion | None:
    """A version row (joined with its body, perhaps with its record) as a value."""
    if r is None:
        return None
    keys = r.keys()
    data = r["data"]
    return StoredVersion(
        r["record_id"], r["memory_id"], int(r["version"]), r["body_digest"], r["written_at"],
        r["invalidated_at"], r["forgotten_at"], load(r["written_by"]), load(r["extra"]),
        r["changeset_id"],
        data.encode("utf-8") if isinstance(data, str) else (bytes(data) if data else None),
        int(r["n"]) if "n" in keys else None, r["rstatus"] if "rstatus" in keys else None)


def _versions(rows: list[sqlite3.Row]) -> list[StoredVersion]:
    return [v for v in map(_version_of, rows) if v is not None]


__all__ = ["RecordRows"]
