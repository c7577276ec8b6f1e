"""The record projection of the embedded store: records, versions, edges, counts and the
FTS5 index — written by the projection of accepted ops, read by get, list, history, graph,
prime and recall. A base of :class:`palimpsest.service.storage.sqlite.SqliteStore`, like
:mod:`.principals` and :mod:`.files`; every row leaves as a value of :mod:`.rows`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from palimpsest.search.fts import match_terms
from palimpsest.service.storage.changesets import ChangesetRows, digest_key
from palimpsest.service.storage.pack import id_bytes, id_letters
from palimpsest.service.storage.rows import Edge, Hit, RecordHead, StoredVersion
from palimpsest.service.storage.schema import BM25, load


def record_key(record_id: str) -> bytes | str:
    """A record id as its row keeps it: an id the service minted (``hrec_`` and 26 base32
    letters) as the 16 bytes they spell, any other id as its text."""
    if len(record_id) == 31 and record_id.startswith("hrec_"):
        raw = id_bytes(record_id[5:])
        if raw is not None:
            return raw
    return record_id


def _rid(value: Any) -> str:
    """A record id from its row (see :func:`record_key`)."""
    return "hrec_" + id_letters(value) if isinstance(value, bytes) else str(value)


class RecordRows(ChangesetRows):
    """Projection writes and record reads over ``_db``.

    A record's current version lives in its ``records`` row (most records never have
    another); ``versions`` keeps the versions it superseded, keyed by the record's row."""

    _writers: dict[int, Any]
    # How a row keeps a record id, and back (a server database keeps the text itself).
    _record_key: Callable[[str], bytes | str] = staticmethod(record_key)
    _record_id: Callable[[Any], str] = staticmethod(_rid)

    def _count(self, memory_id: str, delta: int) -> None:
        self._x("INSERT INTO memory_counts VALUES (?, ?) ON CONFLICT(memory_id) DO UPDATE "
                "SET active = memory_counts.active + excluded.active", (memory_id, delta))

    def _add_terms(self) -> None:
        """Give a store of schema 3 written before ``records.terms`` the column and its
        per-memory sums (the triggers of :data:`.schema.TERMS_TRIGGERS` keep them after)."""
        if any(r["name"] == "terms" for r in self._q("PRAGMA table_info(records)")):
            return
        self._x("ALTER TABLE records ADD COLUMN terms INTEGER NOT NULL DEFAULT 0")
        for r in self._q("SELECT rowid AS n, text, context FROM record_fts"):
            self._x("UPDATE records SET terms=? WHERE n=?",
                    (_terms(r["text"], r["context"]), r["n"]))
        self._x("DELETE FROM record_terms")
        self._x("INSERT INTO record_terms SELECT mem, count(*), sum(terms) FROM records "
                "GROUP BY mem")

    # --- projection -----------------------------------------------------------------------
    def record_head(self, record_id: str) -> RecordHead | None:
        """The current state of a record, ``None`` when the projection holds none."""
        r = self._one("SELECT n, id, mem, type, version, status, written_at, body "
                      "FROM records WHERE id=?", (self._record_key(record_id),))
        if r is None:
            return None
        return RecordHead(r["n"], record_id, self._name(r["mem"]), r["type"], r["version"],
                          r["status"], r["written_at"], _hex(r["body"]))

    def project_version(self, *, record_id: str, memory_id: str, version: int, type: str,
                        body_digest: str, written_at: str, written_by: str, extra: str,
                        changeset_id: str, standing: bool, fts_text: str,
                        edges: Sequence[tuple[str, str]] = (), existing: int | None = None,
                        was_forgotten: bool = False, thread: str | None = None,
                        when: str | None = None) -> None:
        """Apply a new version: supersede the previous one, move the record, reindex."""
        body = _key_of(body_digest)
        writer = self._key(written_by)
        cs = self._seq(changeset_id)
        kept_extra = None if extra == "{}" else extra
        kept_when = None if when == written_at else when  # the default is derived
        if existing is None:
            mem = self._key(memory_id)
            prev = self._previous_episode(mem, None, None, thread) \
                if type == "episode" else None
            context = self._fts_text(prev["n"]) if prev is not None else ""
            cur = self._db.execute(
                "INSERT INTO records (id, mem, type, version, status, written_at, body, "
                "writer, cs, extra, standing, context_src, thread, when_at, terms) "
                "VALUES (?,?,?,?,'active',?,?,?,?,?,?,?,?,?,?)",
                (self._record_key(record_id), mem, type, version, written_at, body, writer, cs,
                 kept_extra, int(standing), prev["id"] if prev is not None else None,
                 thread, kept_when, _terms(fts_text, context)))
            n = cur.lastrowid
            self._count(memory_id, 1)
        else:
            n = existing
            if was_forgotten:
                self._count(memory_id, 1)
            self._x("INSERT INTO versions SELECT n, version, body, written_at, ?, forgotten_at, "
                    "writer, cs, extra FROM records WHERE n=?", (written_at, n))
            self._x("UPDATE records SET version=?, status='active', written_at=?, body=?, "
                    "writer=?, cs=?, extra=?, forgotten_at=NULL, standing=?, thread=?, "
                    "when_at=? WHERE n=?",
                    (version, written_at, body, writer, cs, kept_extra, int(standing), thread,
                     kept_when, n))
            row = self._one("SELECT context FROM record_fts WHERE rowid=?", (n,))
            context = row["context"] if row is not None else ""  # kept as first written
            self._x("UPDATE records SET terms=? WHERE n=?", (_terms(fts_text, context), n))
            self._x("DELETE FROM record_fts WHERE rowid=?", (n,))
        self._x("INSERT INTO record_fts(rowid, text, context) VALUES (?,?,?)",
                (n, fts_text, context))
        if existing is not None:
            self._x("DELETE FROM edges WHERE src=?", (record_id,))
        for dst, rel in edges:
            self._x("INSERT INTO edges VALUES (?,?,?,?)", (record_id, dst, rel, memory_id))

    def _previous_episode(self, mem: int, before: int | None, skip: str | None,
                          thread: str | None) -> Any:
        """The episode written last in memory ``mem`` (before row ``before``; not ``skip``),
        or ``None`` when it belongs to another conversation than ``thread``: the words that
        closed the last conversation are not the context of the first turn of a new one."""
        prev = self._one("SELECT n, id, thread FROM records WHERE mem=? AND "
                         "type='episode' AND (? IS NULL OR n < ?) AND id IS NOT ? "
                         "ORDER BY n DESC LIMIT 1",
                         (mem, before, before, self._record_key(skip) if skip else None))
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
        self._x("UPDATE records SET status='forgotten', forgotten_at=? WHERE n=?", (at, head.n))
        if head.status == "active":
            self._count(head.memory_id, -1)

    def project_erase(self, record_id: str) -> list[str]:
        """Remove every version, body and index entry; returns the body digests it named (a
        body another record also holds — two equal turns — stays that record's)."""
        head = self.record_head(record_id)
        if head is None:
            return []
        keys = [head.body_digest, *(_hex(r["body"]) for r in self._q(
            "SELECT body FROM versions WHERE n=?", (head.n,)))]
        for d in dict.fromkeys(keys):
            key = _key_of(d)
            if self._one("SELECT 1 FROM records WHERE body=? AND n<>? UNION ALL "
                         "SELECT 1 FROM versions WHERE body=? AND n<>? LIMIT 1",
                         (key, head.n, key, head.n)) is None:
                self._drop_body(d)
        self._x("DELETE FROM versions WHERE n=?", (head.n,))
        self._x("DELETE FROM edges WHERE src=?", (record_id,))
        if head.status == "active":
            self._count(head.memory_id, -1)
        self._x("DELETE FROM record_fts WHERE rowid=?", (head.n,))
        self._x("DELETE FROM records WHERE n=?", (head.n,))
        # Episodes indexed with this record's words as context take the episode before it
        # instead, exactly as a rebuild (where this record is never an episode) does.
        for dep in self._q("SELECT n, mem, thread FROM records WHERE context_src=?",
                           (self._record_key(record_id),)):
            prev = self._previous_episode(dep["mem"], dep["n"], record_id, dep["thread"])
            context = self._fts_text(prev["n"]) if prev is not None else ""
            self._x("UPDATE records SET context_src=?, terms=? WHERE n=?",
                    (prev["id"] if prev is not None else None,
                     _terms(self._fts_text(dep["n"]), context), dep["n"]))
            self._x("UPDATE record_fts SET context=? WHERE rowid=?", (context, dep["n"]))
        return list(dict.fromkeys(keys))

    def projection_rows(self) -> dict[str, str]:
        """Every projection row (records with their index text, versions, edges, counts) by a
        key that names it, independent of row numbers and of integer keys (memories, writers
        and changesets by their names), so a rebuild can prove it reproduced the same state —
        and say which rows differ when it did not — and two stores of the same history, of
        either backend, give the same rows."""
        out: dict[str, str] = {}
        queries = (
            ("record", "SELECT r.id AS k, m.name, r.type, r.version, r.status, r.written_at, "
             "r.body, w.name, c.id, r.extra, r.forgotten_at, r.standing, r.context_src, "
             "r.thread, r.when_at, r.terms, f.text, f.context FROM records r "
             "JOIN names m ON m.k = r.mem JOIN names w ON w.k = r.writer "
             "JOIN changesets c ON c.seq = r.cs LEFT JOIN record_fts f ON f.rowid = r.n"),
            ("version", "SELECT r.id AS k, v.version, v.body, v.written_at, "
             "v.invalidated_at, v.forgotten_at, w.name, c.id, v.extra FROM versions v "
             "JOIN records r ON r.n = v.n JOIN names w ON w.k = v.writer "
             "JOIN changesets c ON c.seq = v.cs"),
            ("edge", "SELECT src || ' ' || rel || ' ' || dst AS k, memory_id, COUNT(*) "
             "FROM edges GROUP BY src, dst, rel, memory_id"),
            ("count", "SELECT memory_id AS k, active FROM memory_counts WHERE active != 0"),
            ("terms", "SELECT m.name AS k, t.docs, t.length FROM record_terms t "
             "JOIN names m ON m.k = t.mem WHERE t.docs != 0"),
        )
        for name, sql in queries:
            for row in self._db.execute(sql):
                values = tuple(row)
                key = self._record_id(values[0]) if name in ("record", "version") else values[0]
                if name == "record" and values[12] is not None:
                    values = (*values[:12], self._record_id(values[12]), *values[13:])
                if name == "version":
                    key, values = f"{key}/{values[1]}", values[1:]
                out[f"{name} {key}"] = hashlib.sha256(
                    repr(values[1:]).encode("utf-8")).hexdigest()[:16]
        return out

    def clear_projections(self) -> None:
        """Drop every projection (records, versions, index) before a rebuild."""
        self._x("DELETE FROM records")
        self._x("DELETE FROM versions")
        self._x("DELETE FROM record_fts")
        self._x("DELETE FROM edges")
        self._x("DELETE FROM memory_counts")
        self._x("DELETE FROM record_terms")

    # --- record reads ---------------------------------------------------------------------
    def _mems(self, memory_ids: Sequence[str]) -> list[int]:
        return [k for k in map(self._known, memory_ids) if k is not None]

    def version_row(self, record_id: str, version: int) -> StoredVersion | None:
        """One version with its body."""
        return self._one_version(
            f"{_CURRENT} WHERE r.id=? AND r.version=? UNION ALL {_PAST} WHERE r.id=? AND "
            f"v.version=?", (self._record_key(record_id), version,
                             self._record_key(record_id), version))

    def versions(self, record_id: str) -> list[StoredVersion]:
        """Every version of a record, oldest first."""
        return self._versions(self._q(
            f"SELECT * FROM ({_PAST} WHERE r.id=? UNION ALL {_CURRENT} WHERE r.id=?) AS u "  # noqa: S608
            f"ORDER BY version", (self._record_key(record_id), self._record_key(record_id))))

    def version_at(self, record_id: str, as_of: str) -> StoredVersion | None:
        """The version current at ``as_of``."""
        return self._one_version(
            f"{_CURRENT} WHERE r.id=? AND r.written_at<=? UNION ALL {_PAST} WHERE r.id=? "
            f"AND v.written_at<=? AND v.invalidated_at>?",
            (self._record_key(record_id), as_of, self._record_key(record_id), as_of, as_of))

    def list_current(self, memory_id: str, statuses: Sequence[str], type: str | None,
                     before: int | None, limit: int) -> list[StoredVersion]:
        """Current records of one memory, newest first, keyset-paginated on ``n``."""
        mem = self._known(memory_id)
        if mem is None:
            return []
        marks = ",".join("?" * len(statuses))
        sql = (f"{_CURRENT} WHERE r.mem=? AND r.status IN ({marks}) "
               f"AND (? IS NULL OR r.type=?) AND (? IS NULL OR r.n<?) ORDER BY r.n DESC LIMIT ?")
        return self._versions(self._q(sql, (mem, *statuses, type, type, before, before, limit)))

    def list_at(self, memory_ids: Sequence[str], as_of: str, limit: int,
                offset: int = 0) -> list[StoredVersion]:
        """Versions current at ``as_of`` across memories, newest record first."""
        mems = self._mems(memory_ids)
        if not mems:
            return []
        marks = ",".join("?" * len(mems))
        sql = (f"SELECT * FROM ({_CURRENT} WHERE r.mem IN ({marks}) AND r.written_at<=? "  # noqa: S608
               f"UNION ALL {_PAST} WHERE r.mem IN ({marks}) AND v.written_at<=? AND "
               f"v.invalidated_at>?) AS u ORDER BY n DESC LIMIT ? OFFSET ?")
        return self._versions(self._q(sql, (*mems, as_of, *mems, as_of, as_of, limit, offset)))

    def current_rows(self, ns: Sequence[int]) -> list[StoredVersion]:
        """Current versions of records by projection row number (order not kept)."""
        if not ns:
            return []
        marks = ",".join("?" * len(ns))
        sql = f"{_CURRENT} WHERE r.n IN ({marks})"
        return self._versions(self._q(sql, tuple(ns)), with_status=True)

    def newest_ns(self, memory_ids: Sequence[str], statuses: Sequence[str], limit: int
                  ) -> list[int]:
        """Newest record row numbers across memories (for filter-only recall)."""
        mems = self._mems(memory_ids)
        if not mems:
            return []
        m1 = ",".join("?" * len(mems))
        m2 = ",".join("?" * len(statuses))
        sql = (f"SELECT n FROM records WHERE mem IN ({m1}) AND status IN ({m2}) "  # noqa: S608
               f"ORDER BY n DESC LIMIT ?")
        return [r["n"] for r in self._q(sql, (*mems, *statuses, limit))]

    def standing_rows(self, memory_id: str) -> list[StoredVersion]:
        """Active standing records of a memory, oldest first."""
        mem = self._known(memory_id)
        if mem is None:
            return []
        return self._versions(self._q(f"{_CURRENT} WHERE r.mem=? AND r.standing=1 AND "
                                      f"r.status='active' ORDER BY r.n", (mem,)))

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
        mems = self._mems(memory_ids)
        if not mems:
            return []
        m1 = ",".join("?" * len(mems))
        m2 = ",".join("?" * len(statuses))
        where = (f"record_fts MATCH ? AND r.mem IN ({m1}) AND r.status IN ({m2})")
        args: list[Any] = [match, *mems, *statuses]
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
            f"SELECT f.rowid AS n, f.text AS text, f.context AS context, r.thread AS thread, "  # noqa: S608
            f"COALESCE(r.when_at, r.written_at) AS when_at, p.n AS follows "
            f"FROM record_fts f JOIN records r ON r.n = f.rowid "
            f"LEFT JOIN records p ON p.id = r.context_src WHERE f.rowid IN ({marks})",
            [r["n"] for r in rows])}
        out = []
        for r in rows:
            m = more.get(r["n"])
            out.append(Hit(int(r["n"]), -float(r["s"]), m["text"] if m else "",
                           m["thread"] if m else None, m["when_at"] if m else None,
                           m["follows"] if m else None, m["context"] if m else ""))
        return out

    def term_docs(self, terms: Sequence[str],
                  memory_ids: Sequence[str] | None = None) -> dict[str, int]:
        """How many indexed records of ``memory_ids`` (``None``: of the store) hold each term.

        The FTS5 vocabulary answers for the store; when the reach leaves out some memory of the
        store, every term the vocabulary holds is counted again within the reach (by the
        index, so a term only another memory holds counts 0 here)."""
        out: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            r = self._one("SELECT doc FROM record_vocab WHERE term=?", (term,))
            out[term] = int(r["doc"]) if r else 0
        if memory_ids is None:
            return out
        held = [t for t, n in out.items() if n > 0]
        if not held or self._whole_store(memory_ids):
            return out
        mems = self._mems(memory_ids)
        marks = ",".join("?" * len(mems))
        for term in held:
            match = match_terms([term], "any")
            r = self._one(f"SELECT count(*) AS c FROM record_fts f CROSS JOIN records r "  # noqa: S608
                          f"ON r.n = f.rowid WHERE record_fts MATCH ? "
                          f"AND r.mem IN ({marks})", (match, *mems)) \
                if match is not None and mems else None
            out[term] = int(r["c"]) if r else 0
        return out

    def reach_size(self, memory_ids: Sequence[str]) -> tuple[int, int] | None:
        """How many records of ``memory_ids`` are indexed and their analysed length over both
        columns (every status and type, as FTS5 counts them) — with :meth:`term_docs`, the
        BM25 statistics of the reach; ``None`` when the reach is the whole store (FTS5's own
        scores are then already the reach's)."""
        if self._whole_store(memory_ids):
            return None
        mems = self._mems(memory_ids)
        if not mems:
            return 0, 0
        row = self._one(f"SELECT COALESCE(sum(docs), 0) AS d, COALESCE(sum(length), 0) AS l "  # noqa: S608
                        f"FROM record_terms WHERE mem IN ({','.join('?' * len(mems))})", mems)
        return (int(row["d"]), int(row["l"])) if row is not None else (0, 0)

    def _whole_store(self, memory_ids: Sequence[str]) -> bool:
        """Whether ``memory_ids`` names every memory whose records the index holds (then the
        store's counts are the reach's; a memory with none, or a mounted one, changes
        nothing)."""
        mems = self._mems(memory_ids)
        if not mems:
            return False
        marks = ",".join("?" * len(mems))
        return self._one(f"SELECT 1 FROM record_terms WHERE docs > 0 AND mem NOT IN ({marks}) "  # noqa: S608
                         f"LIMIT 1", mems) is None

    def memory_of_records(self, record_ids: Sequence[str]) -> dict[str, str]:
        """Which memory holds each record id (for references and graph edges)."""
        out: dict[str, str] = {}
        for rid in record_ids:
            r = self._one("SELECT mem FROM records WHERE id=?", (self._record_key(rid),))
            if r is not None:
                out[rid] = self._name(r["mem"])
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


    # --- rows into values -----------------------------------------------------------------
    def _written_by(self, k: int) -> Any:
        found = self._writers.get(k)
        if found is None:
            found = self._writers[k] = load(self._name(k))
        return found

    def _version_of(self, r: Any, with_status: bool = False) -> StoredVersion:
        """A version row (joined with its body and changeset) as a value."""
        blob = r["data"]
        data: bytes | None = None
        if blob is not None:
            raw = blob.encode("utf-8") if isinstance(blob, str) else bytes(blob)
            bases = bytes(r["bases"]) if r["bases"] is not None else None
            try:
                data = self._inflated(raw, bases)
            except ValueError:
                data = raw  # damaged: the digest check refuses it
        return StoredVersion(
            self._record_id(r["id"]), self._name(r["mem"]), int(r["version"]), _hex(r["body"]),
            r["written_at"], r["invalidated_at"], r["forgotten_at"], self._written_by(r["writer"]),
            load(r["extra"]) if r["extra"] is not None else {}, bytes(r["cid"]).hex(), data,
            int(r["n"]), r["status"] if with_status else None)

    def _one_version(self, sql: str, args: Sequence[Any]) -> StoredVersion | None:
        row = self._one(sql, args)
        return self._version_of(row) if row is not None else None

    def _versions(self, rows: list[Any], with_status: bool = False
                  ) -> list[StoredVersion]:
        return [self._version_of(r, with_status) for r in rows]


# The current version of a record (its own row) and a superseded one, in the same columns.
_CURRENT = ("SELECT r.n, r.id, r.mem, r.version, r.body, r.written_at, NULL AS invalidated_at, "
            "r.forgotten_at, r.writer, r.extra, c.id AS cid, r.status, b.data, b.bases "
            "FROM records r JOIN changesets c ON c.seq = r.cs "
            "LEFT JOIN bodies b ON b.digest = r.body")
_PAST = ("SELECT v.n, r.id, r.mem, v.version, v.body, v.written_at, v.invalidated_at, "
         "v.forgotten_at, v.writer, v.extra, c.id AS cid, NULL AS status, b.data, b.bases "
         "FROM versions v JOIN records r ON r.n = v.n JOIN changesets c ON c.seq = v.cs "
         "LEFT JOIN bodies b ON b.digest = v.body")


def _hex(value: Any) -> str:
    """A digest as the service names it (hex), from the 32 bytes a row keeps."""
    return bytes(value).hex() if isinstance(value, bytes) else str(value)


def _key_of(digest: str) -> bytes | str:
    """A digest as a row keeps it: 32 bytes (a name no digest has stays text)."""
    return digest_key(digest) or digest


__all__ = ["RecordRows", "record_key"]


def _terms(text: str, context: str) -> int:
    """A record's analysed length over both indexed columns (as :func:`bm25.scores` and FTS5
    count it: the analysed text is its terms separated by spaces)."""
    return len(text.split()) + len(context.split())
