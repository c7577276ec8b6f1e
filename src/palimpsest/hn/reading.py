"""Read-side shells shared by ``pal memory show|recall|grep`` and the ``pal mcp`` repo tools.

Each function takes an open repository, reads Git through :mod:`palimpsest.hn.store` (with
:mod:`palimpsest.hn.replication`, the only part that touches Git) and returns what the pure
formatters need, so the CLI and the MCP server call the same code: :func:`show_at` (one memory
and the projection at a revision), :func:`request_at` (a strict ``RecallRequestV0`` whose
``atCommit`` may be any revision, default ``HEAD``) and :func:`writers_of` (who signed each
memory of a recall page, with the signed ``actorName``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pygit2

from palimpsest.errors import InvalidInput
from palimpsest.hn import store
from palimpsest.hn.envelope import VerifiedMemory
from palimpsest.hn.index import StaleIndex, open_index
from palimpsest.hn.recall.request import RecallRequest, request_from_value
from palimpsest.hn.show import find_memory

if TYPE_CHECKING:
    from palimpsest.hn.projection import Projection


def show_at(
    repo: pygit2.Repository, lookup: str, at: str = "HEAD"
) -> tuple[VerifiedMemory, Projection]:
    """The memory named by ``lookup`` (full ID or ≥8 hex) and the projection at ``at`` (§17.1).

    Raises:
        InvalidInput: a malformed or ambiguous lookup, or a revision that names no commit.
        NotFound: ``memory-not-found``.
    """
    # Loaded here: projection and policy are not needed by appends or recall.
    from palimpsest.hn import policy, projection  # noqa: PLC0415

    memories = store.collect(repo)
    found = find_memory(memories, lookup)
    head = store.resolve_commit(repo, at)
    context = policy.policy_context(head, store.policy_blob(repo, head))
    result = projection.project(memories, store.RepoProbe(repo), at_commit=head, policy=context)
    return found, result


def request_at(repo: pygit2.Repository, value: dict[str, Any]) -> RecallRequest:
    """A ``RecallRequestV0`` object whose ``atCommit`` is optional (default ``HEAD``) and may be
    any revision; it is resolved to the full commit ID, then the strict rules of ``--input``
    apply (``version`` defaults to 0).

    Raises:
        InvalidInput: ``invalid-revision`` or ``invalid-recall-request``.
    """
    body = dict(value)
    at = body.pop("atCommit", "HEAD")
    if not isinstance(at, str) or not at:
        raise InvalidInput("atCommit must be a revision such as HEAD or a commit ID",
                           code="invalid-recall-request")
    body["atCommit"] = store.resolve_commit(repo, at)
    body.setdefault("version", 0)
    return request_from_value(body)


def writers_of(
    repo: pygit2.Repository, request: RecallRequest, envelope_json: bytes
) -> list[dict[str, str]]:
    """``[{memoryId, actor, actorName}]`` for each memory of a recall/grep page, in page order,
    from the signed envelopes (index rows carry only the actor ID).

    The envelopes come from the index (just brought up to date by the recall), each hash and
    signature checked again; a damaged index falls back to verifying the refs in full.
    """
    page = [m["id"] for m in json.loads(envelope_json)["memories"]]
    if not page:
        return []
    try:
        with open_index(repo) as index:
            found = index.memories(page)
    except StaleIndex:
        wanted = set(page)
        found = [m for m in store.collect(repo) if m.memory_id in wanted]
    names = {m.memory_id: m.envelope for m in found}
    return [
        {"memoryId": mid, "actor": names[mid].actor, "actorName": names[mid].actor_name}
        for mid in page
        if mid in names
    ]


__all__ = ["request_at", "show_at", "writers_of"]
