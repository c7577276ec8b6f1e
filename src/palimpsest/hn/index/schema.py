"""Schema and row format of the private recall index (see :mod:`palimpsest.hn.index.core`).

Pure pieces shared by the builder, the incremental writer, verify and the queries: the SQLite
schema, the stored columns of a row and their MAC, the posting words and grep surface of a
record, the document IDs of the postings, and the §19.2 source fingerprint.  No file or Git
access here.

Everything stored is free of query context: a row holds what a memory is whatever commit,
subject, path or policy a recall asks about (its lifecycle and edges, whether its anchor commit
and path anchors check out, its evidence, its anchor and applicability mode); the recall JSON of
a row is kept in two parts around its ``trust`` value, because only rows applicable at the
query commit are ever returned (so ``applicability`` is always ``applicable`` there) and trust
comes from the policy at the query commit.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from palimpsest.hn.ids import KINDS
from palimpsest.text import word_tokens

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    from typing import Any

FORMAT = "pal-hn-memory-index/9"
INDEX_NAME = "index-pal-v1.sqlite"
KEY_NAME = "index-pal-v1.key"
TEMP_PREFIX = ".hn-private-"
# §16.6: in recall output these empty lists are null.
RECALL_NIL = frozenset(
    ("challengers", "successors", "retractions", "evidenceDetails", "dependencies", "data.evidence")
)
LIFECYCLE_RANK = {
    "active": 0,
    "superseded": 1,
    "retracted": 2,
    "branching": 3,
    "dependency-missing": 4,
}
OTHER_RANK = 9
MODE_CODE = {"descendants": 0, "exact": 1, "subject": 2}
DESCENDANTS, EXACT, SUBJECT = 0, 1, 2
KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}
KIND_OF = dict(enumerate(KINDS))


SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT",
    "CREATE TABLE sources (ref TEXT PRIMARY KEY, head TEXT NOT NULL, count INTEGER NOT NULL,"
    " last_id TEXT NOT NULL) STRICT",
    "CREATE TABLE entries (ref TEXT NOT NULL, sequence INTEGER NOT NULL, id TEXT NOT NULL,"
    " commit_id TEXT NOT NULL, PRIMARY KEY (ref, sequence)) STRICT",
    "CREATE INDEX entries_id ON entries (id)",
    "CREATE TABLE envelopes (id TEXT PRIMARY KEY, commit_id TEXT NOT NULL, ref TEXT NOT NULL,"
    " operation TEXT NOT NULL, target TEXT NOT NULL, payload BLOB NOT NULL,"
    " signature TEXT NOT NULL) STRICT",
    "CREATE INDEX envelopes_target ON envelopes (target)",
    # One row per record/supersede memory; every column but ``mac`` is covered by the MAC.
    # ``base``: ``ok`` when the anchor commit is a commit and every path anchor checks out at
    # it, else ``anchor-missing`` / ``anchor-invalid`` (§13 steps 1-2, context-free).
    "CREATE TABLE rows (id TEXT PRIMARY KEY, actor TEXT NOT NULL, kind TEXT NOT NULL,"
    " lifecycle TEXT NOT NULL, lifecycle_rank INTEGER NOT NULL, base TEXT NOT NULL,"
    " evidence TEXT NOT NULL, timestamp TEXT NOT NULL, mode TEXT NOT NULL,"
    " anchor TEXT NOT NULL, anchor_subject TEXT NOT NULL, content_bytes INTEGER NOT NULL,"
    " data_bytes INTEGER NOT NULL, search_units INTEGER NOT NULL, head BLOB NOT NULL,"
    " tail BLOB NOT NULL, deps BLOB NOT NULL, fields BLOB NOT NULL, mac TEXT NOT NULL) STRICT",
    # Anchor commits by small integer ID; ``state`` is the commit's object state when last
    # probed (``missing`` ones are probed again on every open: a fetch may bring them), and
    # the counts are of eligible rows per mode (descendants, exact).
    "CREATE TABLE anchors (aid INTEGER PRIMARY KEY, commit_id TEXT NOT NULL UNIQUE,"
    " state TEXT NOT NULL, n_desc INTEGER NOT NULL, n_exact INTEGER NOT NULL,"
    " mac TEXT NOT NULL) STRICT",
    "CREATE INDEX anchors_missing ON anchors (aid) WHERE state = 'missing'",
    # Actors by small integer slot; a row's class is ``slot * 8 + kind code``.
    "CREATE TABLE actors (slot INTEGER PRIMARY KEY, actor TEXT NOT NULL UNIQUE) STRICT",
    # Per-class totals of eligible rows, so counts never scan the whole table.
    "CREATE TABLE groups (mode INTEGER NOT NULL, lifecycle_rank INTEGER NOT NULL,"
    " cls INTEGER NOT NULL, n INTEGER NOT NULL, max_content INTEGER NOT NULL,"
    " max_data INTEGER NOT NULL, units INTEGER NOT NULL, mac TEXT NOT NULL,"
    " PRIMARY KEY (mode, lifecycle_rank, cls)) STRICT, WITHOUT ROWID",
    # One narrow row per ``rows`` row with every filter and order column under integer IDs.
    # ``rid`` is a stable small integer per memory; ``doc`` (its document in ``terms``) puts
    # the row's eligibility, mode, lifecycle rank and class above it (:func:`doc_group`), so
    # a count of those filters is a few rowid ranges of ``terms`` alone.  Derived from ``rows``.
    "CREATE TABLE row_keys (doc INTEGER PRIMARY KEY, rid INTEGER NOT NULL UNIQUE,"
    " id TEXT NOT NULL UNIQUE, eligible INTEGER NOT NULL, mode INTEGER NOT NULL,"
    " aid INTEGER NOT NULL, lifecycle_rank INTEGER NOT NULL, timestamp TEXT NOT NULL,"
    " cls INTEGER NOT NULL, content_bytes INTEGER NOT NULL, data_bytes INTEGER NOT NULL,"
    " search_units INTEGER NOT NULL) STRICT",
    # Walks eligible keys in recall order (§16.4): the page of a filter that matches often.
    "CREATE INDEX row_keys_walk ON row_keys (eligible, lifecycle_rank, timestamp DESC, id,"
    " cls, mode, aid, doc)",
    # The rows of some anchors (covering): applicability counts at a query commit that does
    # not reach every anchor, and the rows a fetched anchor commit frees.
    "CREATE INDEX row_keys_anchor ON row_keys (aid, mode, eligible, lifecycle_rank, cls, doc)",
    # Topic, lexical-term, path, anchor and subject postings of each row as opaque ASCII
    # words (:func:`posting_terms`).  Contentless and without positions: the only question is
    # "which rows hold every one of these terms".  A row's terms come from its signed record
    # and never change, so its words are written once; its document moves when its
    # eligibility or lifecycle does.
    "CREATE VIRTUAL TABLE terms USING fts5(words, content='', detail=none, columnsize=0,"
    " tokenize='ascii')",
    # Rows whose evidence names a memory (re-projected when it arrives).
    "CREATE TABLE evidence_refs (memory TEXT NOT NULL, id TEXT NOT NULL,"
    " PRIMARY KEY (memory, id)) WITHOUT ROWID",
    # Git objects a row's evidence names that were missing (probed again on every open).
    "CREATE TABLE missing_objects (oid TEXT NOT NULL, id TEXT NOT NULL,"
    " PRIMARY KEY (oid, id)) WITHOUT ROWID",
    # Which anchors each recently asked query commit reaches (descendants applicability): a
    # bitmap over anchor IDs up to ``upto``; a cache, checked by MAC and by the ancestry walk.
    "CREATE TABLE reach (commit_id TEXT PRIMARY KEY, upto INTEGER NOT NULL, bits BLOB NOT NULL,"
    " stamp INTEGER NOT NULL, mac TEXT NOT NULL) STRICT",
    # The ``.hn/policy.json`` blob of recently asked query commits (``present`` 0: none there)
    # and the ID of the ``.hn`` tree it came from ("" when there is none), so a recall at a
    # commit asked before reads no Git object, and a new commit whose ``.hn`` tree did not
    # change reuses the blob; MAC-signed.
    "CREATE TABLE policies (commit_id TEXT PRIMARY KEY, tree_id TEXT NOT NULL,"
    " present INTEGER NOT NULL, blob BLOB NOT NULL, stamp INTEGER NOT NULL,"
    " mac TEXT NOT NULL) STRICT",
    "CREATE INDEX policies_tree ON policies (tree_id)",
)


def source_fingerprint(policy_digest: str, refs: Iterable[tuple[str, str]]) -> str:
    """§19.2: SHA-256 over length-prefixed parts: tag, policy digest, sorted (ref, head)."""
    digest = hashlib.sha256()

    def part(text: str) -> None:
        data = text.encode("utf-8")
        digest.update(struct.pack(">Q", len(data)))
        digest.update(data)

    part("hn-memory-index-source-v0")
    part(policy_digest)
    for name, head in sorted(refs):
        part(name)
        part(head)
    return "sha256:" + digest.hexdigest()


def heads_digest(refs: Iterable[tuple[str, str]]) -> str:
    """A digest of (ref, head) pairs: the §19.2 construction without a policy digest (the
    index's own note of which heads it was brought up to date with)."""
    return source_fingerprint("", refs)


# A superset of Go's word runes (letters and numbers): Python's alphanumerics.  Every code point
# in Go's set is matched (checked exhaustively by a test), so runs found here contain every
# word; non-ASCII runs are re-split with the exact per-rune rules of palimpsest.text.
_ALNUM_RUNS = re.compile(r"[^\W_]+")


def index_tokens(text: str) -> list[str]:
    """Exactly :func:`palimpsest.text.lexical_tokens`, with a fast path for ASCII runs."""
    out: set[str] = set()
    for run in _ALNUM_RUNS.findall(text):
        if run.isascii():
            out.add(run.lower())
        else:
            out.update(word_tokens(run))
    return sorted(out)


def search_fields(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The grep surface of one record's ``data``: content, each topic, each handoff string.

    Each item is ``(label, value)``; matching never crosses items (§23).
    """
    fields = [("content", str(data["content"]))]
    fields += [(f"topic[{i}]", str(t)) for i, t in enumerate(data.get("topics") or ())]
    handoff = data.get("handoff")
    if isinstance(handoff, dict):
        for key in ("completed", "assumptions", "blockers", "nextActions"):
            fields += [(f"handoff.{key}[{i}]", str(v)) for i, v in enumerate(handoff[key])]
    return fields


# ------------------------------------------------------------------------- file safety


_EXPECTED_SCHEMA: list[tuple[str, str, str | None]] | None = None


def schema_of(
    conn: sqlite3.Connection, database: str = "main"
) -> list[tuple[str, str, str | None]]:
    """Every object of the database's schema as ``(type, name, sql)``, sorted."""
    rows = conn.execute(
        f"SELECT type, name, sql FROM {database}.sqlite_master ORDER BY type, name"  # noqa: S608
    ).fetchall()
    return [(str(t), str(n), None if s is None else str(s)) for t, n, s in rows]


def expected_schema() -> list[tuple[str, str, str | None]]:
    """The schema a file of this format has, exactly."""
    global _EXPECTED_SCHEMA  # noqa: PLW0603 - computed once per process
    if _EXPECTED_SCHEMA is None:
        conn = sqlite3.connect(":memory:")
        for statement in SCHEMA:
            conn.execute(statement)
        _EXPECTED_SCHEMA = schema_of(conn)
        conn.close()
    return _EXPECTED_SCHEMA


# ``progress(phase, done, total)``: a long build reports what it has done (a terminal shows it).
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class IndexState:
    """What the index was brought up to date with: every source ref and its head."""

    sources: tuple[tuple[str, str], ...]
    records: int

    def fingerprint(self, policy_digest: str) -> str:
        """The §19.2 source fingerprint under the policy digest of a query commit."""
        return source_fingerprint(policy_digest, self.sources)


class IndexTampered(Exception):
    """A row or total read from the index failed its integrity check: rebuild and retry."""


class StaleIndex(Exception):
    """Internal: the stored index cannot be used as it is (the reason says why)."""


# ------------------------------------------------------------------------- rows


# Every column of ``rows`` but ``mac``, in table order: the MAC covers all of them, so a
# returned row whose filter columns or JSON were edited is detected.
ROW_COLUMNS = (
    "id", "actor", "kind", "lifecycle", "lifecycle_rank", "base", "evidence", "timestamp",
    "mode", "anchor", "anchor_subject", "content_bytes", "data_bytes", "search_units", "head",
    "tail", "deps", "fields",
)  # fmt: skip
COLUMN = {name: i for i, name in enumerate(ROW_COLUMNS)}
INSERT_ROW = "INSERT INTO rows VALUES (" + ", ".join("?" * (len(ROW_COLUMNS) + 1)) + ")"  # noqa: S608
TRUST_KEY = b',"trust":'
DATA_KEY = b',"data":'


def mac_of(key: bytes, values: Sequence[Any]) -> str:
    """Keyed BLAKE2b (a MAC by construction) over the values, length-prefixed (their count,
    then every length, then every value), in one call."""
    parts = [v if v.__class__ is bytes else str(v).encode("utf-8") for v in values]
    lengths = struct.pack(f">{len(parts) + 1}Q", len(parts), *map(len, parts))
    return hashlib.blake2b(lengths + b"".join(parts), key=key, digest_size=32).hexdigest()


def base_of(applicability: str) -> str:
    """The context-free part of applicability: ``ok`` once the anchor checks out (§13 steps
    1-2); ``anchor-missing`` / ``anchor-invalid`` otherwise."""
    return "ok" if applicability in ("applicable", "inapplicable") else applicability


def recall_json(values: Sequence[Any], trust: str) -> bytes:
    """The exact recall JSON of a stored row under a trust class."""
    return b"".join(
        (bytes(values[COLUMN["head"]]), b'"', trust.encode(), b'"', bytes(values[COLUMN["tail"]]))
    )


def row_data(values: Sequence[Any]) -> dict[str, Any]:
    """The ``data`` object of a stored row (its recall JSON's last member)."""
    tail = bytes(values[COLUMN["tail"]])
    data: dict[str, Any] = json.loads(tail[len(DATA_KEY) : -1])
    return data


def eligible(values: Sequence[Any]) -> bool:
    """Whether a stored row can apply at some query commit: its anchor checks out and its
    evidence is resolved (recall drops every other row, §16.3)."""
    return bool(values[COLUMN["base"]] == "ok" and values[COLUMN["evidence"]] == "resolved")


# --------------------------------------------------------------- row keys and postings


_SHORT_TERM = 32  # bytes; longer values are posted under their SHA-256


def term(kind: str, value: str) -> str:
    # An opaque word of [0-9a-z] that FTS5's ascii tokenizer keeps whole and unchanged: a kind
    # letter, then the hex of the value's UTF-8 (or, for a long value, of its SHA-256 under
    # another letter, so no two distinct values ever share a word).
    data = value.encode("utf-8", "surrogatepass")
    if len(data) <= _SHORT_TERM:
        return kind + data.hex()
    return chr(ord(kind) + 1) + hashlib.sha256(data).hexdigest()


def anchor_term(commit: str) -> str:
    """The posting word of an anchor commit (its lower-case hex is already a plain word)."""
    return "a" + commit


def match_query(*, topics: Sequence[str], tokens: Sequence[str], path: str, subject: str) -> str:
    """The ``terms MATCH`` expression asking for rows posted under every given value ("" when
    nothing is asked)."""
    words = [term("t", t) for t in topics] + [term("w", t) for t in tokens]
    words += [term("p", path)] if path else []
    words += [term("j", subject)] if subject else []
    return " AND ".join(f'"{w}"' for w in words)


def any_anchor(commits: Iterable[str]) -> str:
    """A ``terms MATCH`` expression for rows anchored at any of ``commits``."""
    return "(" + " OR ".join(f'"{anchor_term(c)}"' for c in commits) + ")"


_RID_BITS = 32
CLS_BITS = 23  # up to 2**20 actors (slot), 8 kinds each
MAX_SLOT = (1 << (CLS_BITS - 3)) - 1
_RANKS = 10  # LIFECYCLE_RANK values and OTHER_RANK


def class_of(slot: int, kind: str) -> int:
    """The class of a row: its actor's slot and its kind code (7 for any other kind)."""
    return slot * 8 + KIND_CODE.get(kind, 7)


def doc_group(mode: int, rank: int, cls: int) -> int:
    """The high part of the ``terms`` document of an eligible row of this mode, lifecycle rank
    and class (0 is kept for rows that are not eligible)."""
    return 1 + ((mode * _RANKS + rank) << CLS_BITS) + cls


def doc_id(rid: int, group: int) -> int:
    """A row's document ID in ``terms``: ``group << 32 | rid`` (``rid`` < 2**32)."""
    return group << _RID_BITS | rid


def group_range(first: int, last: int) -> tuple[int, int]:
    """The smallest and largest document IDs of the groups ``first..last``."""
    return first << _RID_BITS, ((last + 1) << _RID_BITS) - 1


def key_values(
    values: Sequence[Any], slot: int, aid: int, rid: int
) -> tuple[Any, ...]:
    """The ``row_keys`` row of stored row ``values`` (actor in ``slot``, anchor ``aid``)."""
    ok = eligible(values)
    mode = MODE_CODE.get(str(values[COLUMN["mode"]]), SUBJECT)
    rank = int(values[COLUMN["lifecycle_rank"]])
    cls = class_of(slot, str(values[COLUMN["kind"]]))
    doc = doc_id(rid, doc_group(mode, rank, cls) if ok else 0)
    return (doc, rid, values[0], int(ok), mode, aid, rank, values[COLUMN["timestamp"]], cls,
            values[COLUMN["content_bytes"]], values[COLUMN["data_bytes"]],
            values[COLUMN["search_units"]])  # fmt: skip


INSERT_KEY = "INSERT INTO row_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
GROUP_SQL = (
    "SELECT mode, lifecycle_rank, cls, count(*), max(content_bytes), max(data_bytes),"
    " sum(search_units) FROM row_keys WHERE eligible = 1"
)

__all__ = [
    "CLS_BITS",
    "COLUMN",
    "DATA_KEY",
    "DESCENDANTS",
    "EXACT",
    "FORMAT",
    "GROUP_SQL",
    "INDEX_NAME",
    "INSERT_KEY",
    "INSERT_ROW",
    "KEY_NAME",
    "KIND_CODE",
    "KIND_OF",
    "LIFECYCLE_RANK",
    "MAX_SLOT",
    "MODE_CODE",
    "OTHER_RANK",
    "RECALL_NIL",
    "ROW_COLUMNS",
    "SCHEMA",
    "SUBJECT",
    "TEMP_PREFIX",
    "TRUST_KEY",
    "IndexState",
    "IndexTampered",
    "Progress",
    "StaleIndex",
    "anchor_term",
    "any_anchor",
    "base_of",
    "class_of",
    "doc_group",
    "doc_id",
    "eligible",
    "expected_schema",
    "group_range",
    "heads_digest",
    "index_tokens",
    "key_values",
    "mac_of",
    "match_query",
    "recall_json",
    "row_data",
    "schema_of",
    "search_fields",
    "source_fingerprint",
    "term",
]
