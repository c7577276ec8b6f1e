"""``pal memory index verify``: re-derive the whole index from Git and compare (§19.4).

A fresh index is built into a private temporary file (the same streaming build a rebuild uses),
attached to the stored one, and every table is compared with it: envelopes, entries, sources,
rows (MACs included), anchors, the row keys and every (word, memory) posting — keys and
postings translated through memory IDs, anchor commits and actors, since their small integer
IDs are assigned in arrival order — the per-class totals against the stored keys, the watch
lists of missing objects, and every kept reach set against a fresh ancestry walk.  A difference
is ``stale``; a file that is not ours is ``corrupt``.  Nothing is written but the temporary
file, which is removed.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3

import pygit2

from palimpsest.errors import Conflict, NotFound
from palimpsest.hn import store
from palimpsest.hn.index.core import MemoryIndex, open_existing
from palimpsest.hn.index.files import check_private_file, index_dir, load_key
from palimpsest.hn.index.reach import walk_reach
from palimpsest.hn.index.schema import (
    CLS_BITS,
    GROUP_SQL,
    INDEX_NAME,
    IndexState,
    IndexTampered,
    Progress,
    StaleIndex,
    heads_digest,
    mac_of,
)
from palimpsest.hn.index.update import build_file, missing_object

_STALE = "memory index stale: derived projection changed"

# The same rows on both sides, as sets.
_TABLES = {
    "envelopes": "SELECT * FROM {db}.envelopes",
    "entries": "SELECT * FROM {db}.entries",
    "sources": "SELECT * FROM {db}.sources",
    "rows": "SELECT * FROM {db}.rows",
    "anchors": "SELECT commit_id, state, n_desc, n_exact FROM {db}.anchors",
    "evidence_refs": "SELECT * FROM {db}.evidence_refs",
    "missing_objects": "SELECT * FROM {db}.missing_objects",
    "row_keys": (
        "SELECT k.id, k.eligible, k.mode, a.commit_id, k.lifecycle_rank, k.timestamp, s.actor,"
        " k.cls & 7, k.content_bytes, k.data_bytes, k.search_units FROM {db}.row_keys k"
        " JOIN {db}.anchors a ON a.aid = k.aid JOIN {db}.actors s ON s.slot = k.cls >> 3"
    ),
    "postings": (
        "SELECT v.term, k.id FROM temp.{db}_vocab v JOIN {db}.row_keys k ON k.doc = v.doc"
    ),
}


def verify_index(repo: pygit2.Repository, *, progress: Progress | None = None) -> IndexState:
    """Re-derive the index and compare it with the file (``progress`` hears about the build).

    Raises:
        NotFound: ``index-missing``.
        Conflict: ``index-stale`` / ``index-corrupt`` naming the cause.
    """
    try:
        return _verify(repo, progress)
    except (KeyError, pygit2.GitError) as exc:
        raise missing_object(exc) from exc


def _verify(repo: pygit2.Repository, progress: Progress | None) -> IndexState:
    directory = index_dir(repo.path)
    path = directory / INDEX_NAME
    if not check_private_file(path):
        raise NotFound(
            "memory index missing", code="index-missing", hint="run 'pal memory index rebuild'"
        )
    key = load_key(directory)
    try:
        conn = open_existing(path)
    except StaleIndex as exc:
        raise Conflict(f"memory index {exc}", code="index-corrupt") from exc
    try:
        refs = store.list_memory_refs(repo)
        pairs = tuple((r.name, r.head) for r in refs)
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("heads") != heads_digest(pairs):
            raise Conflict("memory index stale: source or policy changed", code="index-stale")
        tmp, records = build_file(repo, directory, key, refs, progress, wal=False)
        try:
            conn.execute("ATTACH DATABASE ? AS fresh", (tmp,))
            try:
                same = _same(conn, key) and meta.get("records") == str(records)
                same = same and _reach_holds(repo, MemoryIndex(conn, key, IndexState(pairs, 0)))
            finally:
                conn.execute("DETACH DATABASE fresh")
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp + suffix)
        if not same:
            raise Conflict(_STALE, code="index-stale")
        return IndexState(pairs, records)
    finally:
        conn.close()


def _same(conn: sqlite3.Connection, key: bytes) -> bool:
    for db in ("main", "fresh"):
        conn.execute(
            f"CREATE VIRTUAL TABLE temp.{db}_vocab USING fts5vocab({db}, terms, instance)"
        )
    try:
        for sql in _TABLES.values():
            main, fresh = sql.format(db="main"), sql.format(db="fresh")
            for first, second in ((main, fresh), (fresh, main)):
                if conn.execute(f"SELECT EXISTS ({first} EXCEPT {second})").fetchone()[0]:
                    return False
        # Every posted document and every key row belongs to a row (none dangling).
        orphans = conn.execute(
            "SELECT EXISTS (SELECT doc FROM temp.main_vocab EXCEPT SELECT doc FROM main.row_keys)"
            " OR EXISTS (SELECT id FROM main.row_keys EXCEPT SELECT id FROM main.rows)"
        ).fetchone()[0]
    finally:
        for db in ("main", "fresh"):
            conn.execute(f"DROP TABLE temp.{db}_vocab")
    if orphans:
        return False
    # Each document ID is its key's own group and rid (doc_group and doc_id of schema).
    wrong_docs = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM main.row_keys WHERE (doc & 4294967295) != rid OR"
        " (doc >> 32) != CASE WHEN eligible THEN 1 + ((mode * 10 + lifecycle_rank) << ?)"
        " + cls ELSE 0 END)",
        (CLS_BITS,),
    ).fetchone()[0]
    if wrong_docs:
        return False
    stored = {tuple(g[:-1]): str(g[-1]) for g in conn.execute("SELECT * FROM main.groups")}
    derived = {tuple(v): mac_of(key, v) for v in conn.execute(GROUP_SQL + " GROUP BY 1, 2, 3")}
    if stored != derived:
        return False
    for aid, commit, state, n_desc, n_exact, mac in conn.execute("SELECT * FROM main.anchors"):
        if mac_of(key, (aid, commit, state, n_desc, n_exact)) != mac:
            return False
    return True


def _reach_holds(repo: pygit2.Repository, index: MemoryIndex) -> bool:
    """Every kept reach set (and the policy kept beside it) equals a fresh walk and read
    (nothing kept is trusted)."""
    probe = store.RepoProbe(repo)
    last = index.last_anchor()
    for commit in index.reach_commits():
        try:
            kept = index.reach(commit)
            fresh, complete = walk_reach(index, probe, commit, use_kept=False)
        except IndexTampered:
            return False
        if kept is None or not complete or kept[1] & _upto(kept[0]) != fresh & _upto(kept[0]):
            return False
        if kept[0] > last:
            return False
    return True


def _upto(aid: int) -> int:
    return (1 << (aid + 1)) - 1


__all__ = ["verify_index"]
