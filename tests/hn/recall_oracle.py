"""A recall computed from scratch, straight from the specification (§16), for property tests.

Every stream is verified again, the whole set is projected at the request's query commit,
subject and path with the policy at that commit (:func:`palimpsest.hn.projection.project`),
and the result is filtered, ordered and paged in plain Python — no index, no cache, nothing
shared with the index's query code but the request, cursor and wire helpers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pygit2

from palimpsest.canonical import encode
from palimpsest.errors import InvalidInput
from palimpsest.hn import store
from palimpsest.hn.index.rows import recall_record
from palimpsest.hn.index.schema import LIFECYCLE_RANK, source_fingerprint
from palimpsest.hn.policy import policy_context
from palimpsest.hn.projection import Row, dependency_wire, project
from palimpsest.hn.recall.pages import RecallResult
from palimpsest.hn.recall.request import (
    RecallRequest,
    decode_cursor,
    encode_cursor,
    query_digest,
)
from palimpsest.text import lexical_tokens


def _matches(row: Row, request: RecallRequest) -> bool:
    if row.applicability != "applicable" or row.evidence != "resolved":
        return False
    if request.subject and request.subject not in (row.anchor.subject,
                                                   row.record.applicability.subject):
        return False  # fmt: skip
    if request.path and all(p.path != request.path for p in row.anchor.paths):
        return False
    if not set(request.topic) <= set(row.record.topics):
        return False
    if request.kind and row.kind not in request.kind:
        return False
    if request.actor and row.actor not in request.actor:
        return False
    if request.lifecycle and row.lifecycle not in request.lifecycle:
        return False
    if request.trust and row.trust not in request.trust:
        return False
    text = row.record.content + "\n" + "\n".join(row.record.topics)
    return set(request.query_tokens()) <= set(lexical_tokens(text))


def _json(row: Row) -> bytes:
    return encode(recall_record(row))


def expected_recall(repo: pygit2.Repository, request: RecallRequest) -> RecallResult:
    """The recall of ``request`` as the specification defines it.

    Raises:
        InvalidInput: a bad cursor or a record over the byte bound (the messages recall uses).
    """
    at = request.at_commit
    probe = store.RepoProbe(repo)
    blob = store.policy_blob(repo, at) if probe.commit_state(at) == "commit" else None
    policy = policy_context(at, blob)
    memories = store.collect(repo)
    projection = project(memories, probe, at_commit=at, policy=policy,
                         subject=request.subject, path=request.path)  # fmt: skip
    rows = [row for row in projection.rows if _matches(row, request)]
    rows.sort(key=lambda r: r.id)
    rows.sort(key=lambda r: r.timestamp, reverse=True)
    rows.sort(key=lambda r: LIFECYCLE_RANK.get(r.lifecycle, 9))
    refs = [(r.name, r.head) for r in store.list_memory_refs(repo)]
    digest = query_digest(request, source_fingerprint(policy.digest, refs), policy.digest)
    start = 0
    if request.cursor:
        last = decode_cursor(request.cursor, digest)
        ids = [r.id for r in rows]
        if last not in ids:
            raise InvalidInput("recall cursor no longer names a result in this query")
        start = ids.index(last) + 1
    for row in rows:
        if len(encode(row.record.content)) > request.max_content_bytes:
            raise InvalidInput(
                f"memory {row.id} encoded content exceeds maxContentBytes; raise the explicit"
                " bound"
            )
    page: list[Row] = []
    used = 0
    for row in rows[start:]:
        size = len(encode(row.record.content))
        if len(page) >= request.max_records or used + size > request.max_content_bytes:
            break
        page.append(row)
        used += size
    truncated = start + len(page) < len(rows)
    deps: dict[bytes, dict[str, Any]] = {}
    for row in page:
        for dep in row.dependencies:
            wire = dependency_wire(dep)
            deps[encode(wire)] = wire
    order = ("missingId", "kind", "operation", "ownerId", "stream", "reason")
    return RecallResult(
        digest,
        len(rows),
        truncated,
        encode_cursor(digest, page[-1].id) if truncated and page else "",
        tuple(_json(row) for row in page),
        tuple(sorted(deps.values(), key=lambda d: tuple(d.get(k, "") for k in order))),
    )


def without_cursor(request: RecallRequest) -> RecallRequest:
    """The same request from its first page."""
    return replace(request, cursor="")


__all__ = ["expected_recall", "without_cursor"]
