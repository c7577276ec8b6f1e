"""Schema and row format of the private recall index (see :mod:`palimpsest.hn.index`).

Pure pieces shared by the index's builder, its incremental writer and its queries: the SQLite
schema, the stored columns of a projected row and their HMAC, the lexical tokens and grep surface
of a record, and the §19.2 source fingerprint.  No file or Git access here.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from palimpsest.canonical import encode
from palimpsest.hn.envelope import KINDS
from palimpsest.hn.projection import Row, dependency_wire, row_parts
from palimpsest.text import word_tokens

FORMAT = "pal-hn-memory-index/8"
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
    "CREATE TABLE rows (id TEXT PRIMARY KEY, actor TEXT NOT NULL, kind TEXT NOT NULL,"
    " lifecycle TEXT NOT NULL, lifecycle_rank INTEGER NOT NULL, trust TEXT NOT NULL,"
    " applicability TEXT NOT NULL, evidence TEXT NOT NULL, timestamp TEXT NOT NULL,"
    " anchor_subject TEXT NOT NULL, applies_subject TEXT NOT NULL,"
    " content_bytes INTEGER NOT NULL, data_bytes INTEGER NOT NULL,"
    " search_units INTEGER NOT NULL, json BLOB NOT NULL, deps BLOB NOT NULL,"
    " fields BLOB NOT NULL,"
    " mac TEXT NOT NULL) STRICT",
    # Walks eligible rows in recall order (§16.4) whatever the other filters are.
    "CREATE INDEX rows_walk ON rows (applicability, evidence, lifecycle_rank, timestamp DESC, id)",
    "CREATE INDEX rows_group ON rows (applicability, evidence, lifecycle_rank, trust, kind, actor,"
    " content_bytes, data_bytes, search_units)",
    # Per-class totals of eligible rows, so counts never scan the whole table.
    "CREATE TABLE groups (lifecycle_rank INTEGER NOT NULL, trust TEXT NOT NULL,"
    " kind TEXT NOT NULL, actor TEXT NOT NULL, n INTEGER NOT NULL, max_content INTEGER NOT NULL,"
    " max_data INTEGER NOT NULL, units INTEGER NOT NULL, mac TEXT NOT NULL,"
    " PRIMARY KEY (lifecycle_rank, trust, kind, actor)) STRICT, WITHOUT ROWID",
    # Small integer names for (trust, kind, actor), so row keys stay narrow.
    "CREATE TABLE classes (cls INTEGER PRIMARY KEY, trust TEXT NOT NULL, kind TEXT NOT NULL,"
    " actor TEXT NOT NULL, UNIQUE (trust, kind, actor)) STRICT",
    # One narrow row per ``rows`` row with every filter and order column, so a topic, term or
    # path filter is counted and paged from ``terms`` and these keys without reading ``rows``.
    # ``rid`` is a stable small integer per memory; ``doc`` (its document in ``terms``) puts
    # the row's eligibility, lifecycle rank, trust and kind above it (:func:`doc_group`), so a
    # count of those filters is a few rowid ranges of ``terms`` alone.  Derived from ``rows``.
    "CREATE TABLE row_keys (doc INTEGER PRIMARY KEY, rid INTEGER NOT NULL UNIQUE,"
    " id TEXT NOT NULL UNIQUE, eligible INTEGER NOT NULL, lifecycle_rank INTEGER NOT NULL,"
    " trust INTEGER NOT NULL, timestamp TEXT NOT NULL, cls INTEGER NOT NULL,"
    " anchor_subject TEXT NOT NULL, applies_subject TEXT NOT NULL,"
    " content_bytes INTEGER NOT NULL, data_bytes INTEGER NOT NULL,"
    " search_units INTEGER NOT NULL) STRICT",
    # Walks eligible keys in recall order (§16.4): the page of a filter that matches often.
    "CREATE INDEX row_keys_walk ON row_keys (eligible, lifecycle_rank, timestamp DESC, id,"
    " trust, cls, doc)",
    # Topic, lexical-term and path postings of each row (document ``rid``) as opaque ASCII
    # words (:func:`posting_terms`).  Contentless and without positions: the only question is
    # "which rows hold every one of these terms".  A row's terms come from its signed record
    # and never change, so its document is written once, when the row first appears.
    "CREATE VIRTUAL TABLE terms USING fts5(words, content='', detail=none, columnsize=0,"
    " tokenize='ascii')",
    "CREATE TABLE evidence_refs (memory TEXT NOT NULL, id TEXT NOT NULL,"
    " PRIMARY KEY (memory, id)) WITHOUT ROWID",
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


@dataclass(frozen=True, slots=True)
class IndexContext:
    """The projection context an index is built for (§19.4)."""

    at_commit: str
    subject: str = ""
    path: str = ""


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


def recall_record(row: Row) -> dict[str, Any]:
    """The §19.3 index record of a row, with recall's null-for-empty lists (§16.6)."""
    parts = row_parts(row, nil_empty=RECALL_NIL, sort_data_evidence=True)
    data = parts["data"]
    if not data["topics"]:
        data["topics"] = None  # [inferred] §16.6: Go nil slice
    return parts


# ------------------------------------------------------------------------- file safety


_EXPECTED_SCHEMA: list[tuple[str, str, str | None]] | None = None


def schema_of(conn: sqlite3.Connection) -> list[tuple[str, str, str | None]]:
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
    return [(str(t), str(n), None if s is None else str(s)) for t, n, s in rows]


def expected_schema() -> list[tuple[str, str, str | None]]:
    global _EXPECTED_SCHEMA  # noqa: PLW0603 - computed once per process
    if _EXPECTED_SCHEMA is None:
        conn = sqlite3.connect(":memory:")
        for statement in SCHEMA:
            conn.execute(statement)
        _EXPECTED_SCHEMA = schema_of(conn)
        conn.close()
    return _EXPECTED_SCHEMA


@dataclass(frozen=True, slots=True)
class IndexState:
    """What the index was built from."""

    context: IndexContext
    policy_digest: str
    source_fingerprint: str
    records: int


class IndexTampered(Exception):
    """A row or total read from the index failed its integrity check: rebuild and retry."""


class StaleIndex(Exception):
    """Internal: the stored index cannot be used as it is (the reason says why)."""


# Every column of ``rows`` but ``mac``, in table order: the HMAC covers all of them, so a
# returned row whose filter columns or JSON were edited is detected.
ROW_COLUMNS = (
    "id", "actor", "kind", "lifecycle", "lifecycle_rank", "trust", "applicability", "evidence",
    "timestamp", "anchor_subject", "applies_subject", "content_bytes", "data_bytes",
    "search_units", "json", "deps", "fields",
)  # fmt: skip


INSERT_ROW = "INSERT INTO rows VALUES (" + ", ".join("?" * (len(ROW_COLUMNS) + 1)) + ")"  # noqa: S608


def row_mac(key: bytes, values: Sequence[Any]) -> str:
    # Keyed BLAKE2b (a MAC by construction) over length-prefixed columns, in one call.
    parts = []
    for value in values:
        part = value if isinstance(value, bytes) else str(value).encode("utf-8")
        parts.append(struct.pack(">Q", len(part)))
        parts.append(part)
    return hashlib.blake2b(b"".join(parts), key=key, digest_size=32).hexdigest()


def row_values(row: Row) -> tuple[Any, ...]:
    """The stored columns of a projected row, in :data:`ROW_COLUMNS` order."""
    record = recall_record(row)
    data = record["data"]
    fields = search_fields(data)
    units = sum(len(value.encode("utf-8")) + 1 for _, value in fields)
    return (
        row.id,
        row.actor,
        row.kind,
        row.lifecycle,
        LIFECYCLE_RANK.get(row.lifecycle, 9),
        row.trust,
        row.applicability,
        row.evidence,
        row.timestamp,
        row.anchor.subject,
        row.record.applicability.subject,
        len(encode(row.record.content)),
        len(encode(data)),
        units,
        encode(record),
        encode([dependency_wire(d) for d in row.dependencies]),
        encode([value for _, value in fields]),  # the grep surface, in search_fields order
    )


# --------------------------------------------------------------- row keys and postings


_SHORT_TERM = 32  # bytes; longer values are posted under their SHA-256


def _term(kind: str, value: str) -> str:
    # An opaque word of [0-9a-z] that FTS5's ascii tokenizer keeps whole and unchanged: a kind
    # letter, then the hex of the value's UTF-8 (or, for a long value, of its SHA-256 under
    # another letter, so no two distinct values ever share a word).
    data = value.encode("utf-8", "surrogatepass")
    if len(data) <= _SHORT_TERM:
        return kind + data.hex()
    return chr(ord(kind) + 1) + hashlib.sha256(data).hexdigest()


def posting_terms(row: Row) -> str:
    """The ``terms`` document of a row: its lexical tokens (content and topics), topics and
    anchor paths, each an opaque word (a row has every term it is posted under, no other)."""
    text = row.record.content + "\n" + "\n".join(row.record.topics)
    words = {_term("w", t) for t in index_tokens(text)}
    words.update(_term("t", t) for t in row.record.topics)
    words.update(_term("p", p.path) for p in row.anchor.paths)
    return " ".join(sorted(words))


def match_query(*, topics: Sequence[str], tokens: Sequence[str], path: str) -> str:
    """The ``terms MATCH`` expression asking for rows posted under every given value ("" when
    nothing is asked)."""
    words = [_term("t", t) for t in topics] + [_term("w", t) for t in tokens]
    words += [_term("p", path)] if path else []
    return " AND ".join(f'"{w}"' for w in words)


TRUST_CODE = {"qualified": 0, "actor-untrusted": 1, "kind-untrusted": 2, "policy-missing": 3}
KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}
_OTHER = 7  # any other trust or kind (none exists today): 3 bits each
_RID_BITS = 32


def doc_group(rank: int, trust: int, kind: int) -> int:
    """The high part of the ``terms`` document of an eligible row of this lifecycle rank, trust
    code and kind code (0 is kept for rows that are not eligible)."""
    return 1 + (rank * 8 + trust) * 8 + kind


def doc_id(rid: int, group: int) -> int:
    """A row's document ID in ``terms``: ``group << 32 | rid`` (``rid`` < 2**32)."""
    return group << _RID_BITS | rid


def doc_range(group: int, last: int) -> tuple[int, int]:
    """The smallest and largest document IDs of the groups ``group..last``."""
    return group << _RID_BITS, ((last + 1) << _RID_BITS) - 1


_KEY_SOURCE = ("id", "applicability", "evidence", "lifecycle_rank", "trust", "kind", "timestamp",
               "anchor_subject", "applies_subject", "content_bytes", "data_bytes",
               "search_units")  # fmt: skip
_KEY_INDEX = tuple(ROW_COLUMNS.index(c) for c in _KEY_SOURCE)
CLASS_OF = tuple(ROW_COLUMNS.index(c) for c in ("trust", "kind", "actor"))


def key_values(values: Sequence[Any], cls: int, rid: int) -> tuple[Any, ...]:
    """The ``row_keys`` row of stored row ``values`` of class ``cls`` under ``rid``."""
    (
        mid,
        applicability,
        evidence,
        rank,
        trust,
        kind,
        stamp,
        anchor,
        applies,
        content,
        data,
        units,
    ) = (values[i] for i in _KEY_INDEX)
    eligible = applicability == "applicable" and evidence == "resolved"
    code = TRUST_CODE.get(trust, _OTHER)
    group = doc_group(rank, code, KIND_CODE.get(kind, _OTHER)) if eligible else 0
    doc = doc_id(rid, group)
    return (doc, rid, mid, int(eligible), rank, code, stamp, cls, anchor, applies, content, data,
            units)  # fmt: skip


INSERT_KEY = "INSERT INTO row_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


GROUP_KEY = ("lifecycle_rank", "trust", "kind", "actor")
GROUP_SQL = (
    "SELECT lifecycle_rank, trust, kind, actor, count(*), max(content_bytes), max(data_bytes),"
    " sum(search_units) FROM rows WHERE applicability = 'applicable' AND evidence = 'resolved'"
)

__all__ = [
    "CLASS_OF",
    "FORMAT",
    "GROUP_KEY",
    "GROUP_SQL",
    "INDEX_NAME",
    "INSERT_KEY",
    "INSERT_ROW",
    "KEY_NAME",
    "KIND_CODE",
    "LIFECYCLE_RANK",
    "RECALL_NIL",
    "ROW_COLUMNS",
    "SCHEMA",
    "TEMP_PREFIX",
    "TRUST_CODE",
    "IndexContext",
    "IndexState",
    "IndexTampered",
    "StaleIndex",
    "doc_group",
    "doc_id",
    "doc_range",
    "expected_schema",
    "index_tokens",
    "key_values",
    "match_query",
    "posting_terms",
    "recall_record",
    "row_mac",
    "row_values",
    "schema_of",
    "search_fields",
    "source_fingerprint",
]
