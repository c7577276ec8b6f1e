"""A projected row as the private index stores it: its columns (the recall JSON in two parts
around its trust value) and its posting words.  Used where rows are written or re-derived
(the build, the writer, verify, tests); a recall reads the stored columns and never projects.
"""

from __future__ import annotations

from typing import Any

from palimpsest.canonical import encode
from palimpsest.hn.index.schema import (
    DATA_KEY,
    LIFECYCLE_RANK,
    OTHER_RANK,
    RECALL_NIL,
    TRUST_KEY,
    anchor_term,
    base_of,
    index_tokens,
    search_fields,
    term,
)
from palimpsest.hn.projection import Row, dependency_wire, row_parts


def recall_record(row: Row) -> dict[str, Any]:
    """The §19.3 index record of a row, with recall's null-for-empty lists (§16.6)."""
    parts = row_parts(row, nil_empty=RECALL_NIL, sort_data_evidence=True)
    data = parts["data"]
    if not data["topics"]:
        data["topics"] = None  # [inferred] §16.6: Go nil slice
    return parts


def row_values(row: Row) -> tuple[Any, ...]:
    """The stored columns of a row projected without a query commit (each row at its own
    anchor commit, no subject, no path), in :data:`ROW_COLUMNS` order."""
    record = recall_record(row)
    record["applicability"] = "applicable"  # the only value a returned row can have
    data = record["data"]
    fields = search_fields(data)
    units = sum(len(value.encode("utf-8")) + 1 for _, value in fields)
    whole = encode(record)
    # Keys are never inside a JSON string (quotes there are escaped) and ``data`` is last,
    # so the first ``,"trust":`` and ``,"data":`` are the record's own.
    head = whole[: whole.index(TRUST_KEY) + len(TRUST_KEY)]
    tail = whole[whole.index(DATA_KEY, len(head)) :]
    # Only lifecycle-target dependencies can belong to a returned row: anchor and evidence
    # dependencies make a row ineligible.
    deps = [dependency_wire(d) for d in row.dependencies if d.kind == "lifecycle-target"]
    return (
        row.id,
        row.actor,
        row.kind,
        row.lifecycle,
        LIFECYCLE_RANK.get(row.lifecycle, OTHER_RANK),
        base_of(row.applicability),
        row.evidence,
        row.timestamp,
        row.record.applicability.mode,
        row.anchor.commit,
        row.anchor.subject,
        len(encode(row.record.content)),
        len(encode(data)),
        units,
        head,
        tail,
        encode(deps),
        encode([value for _, value in fields]),  # the grep surface, in search_fields order
    )


def posting_terms(row: Row) -> str:
    """The ``terms`` document of a row: its lexical tokens (content and topics), topics,
    anchor paths, anchor commit and anchor subject, each an opaque word (a row has every term
    it is posted under, no other)."""
    text = row.record.content + "\n" + "\n".join(row.record.topics)
    words = {term("w", t) for t in index_tokens(text)}
    words.update(term("t", t) for t in row.record.topics)
    words.update(term("p", p.path) for p in row.anchor.paths)
    words.add(anchor_term(row.anchor.commit))
    if row.anchor.subject:
        words.add(term("j", row.anchor.subject))
    return " ".join(sorted(words))


__all__ = ["posting_terms", "recall_record", "row_values"]
