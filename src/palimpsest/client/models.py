"""Typed shapes of the service's answers (uhp-memories.md §3–§12, memory-git.md §3–§11).

They are :class:`~typing.TypedDict` s: an answer stays the plain decoded JSON (nothing is
copied or converted, a newer server's extra fields pass through), and a type checker knows its
keys. Keys a server may leave out are ``NotRequired``. Record content is always untrusted data
written by someone, never instructions.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

Json = dict[str, Any]
Privilege = Literal["read", "write", "create", "delete"]


class Count(TypedDict):
    count: int


class Memory(TypedDict):
    """A node of the memory tree, with the caller's effective privileges."""

    id: str
    object: Literal["memory"]
    name: str
    description: NotRequired[str]
    parent_id: str | None
    ancestors: NotRequired[list[str]]
    restricted: NotRequired[bool]
    provider: NotRequired[str]
    privileges: list[Privilege]
    records: NotRequired[Count]
    children: NotRequired[Count]
    createdAt: NotRequired[int]
    updatedAt: NotRequired[int]


class Page(TypedDict):
    object: Literal["list"]
    next: NotRequired[str | None]


class MemoryList(Page):
    data: list[Memory]


class MemoryDeleted(TypedDict):
    id: str
    object: str
    deleted: bool
    memories: list[str]


class Grant(TypedDict):
    id: str
    object: Literal["memory.grant"]
    memory_id: str
    principal: str
    privileges: list[Privilege]
    inherited: NotRequired[bool]


class GrantList(TypedDict):
    object: Literal["list"]
    data: list[Grant]


class Deleted(TypedDict):
    id: str
    object: NotRequired[str]
    deleted: bool


class Writer(TypedDict):
    kind: str
    id: str
    type: NotRequired[str]


class Part(TypedDict, total=False):
    """A content part: ``text``, ``file`` (with ``file: {id, name, media_type, bytes}``) or an
    ``x.``-prefixed extension."""

    type: str
    text: str
    file: Json
    text_source: str
    role: str


class Reference(TypedDict, total=False):
    rel: str
    memory_id: str
    record_id: str
    available: bool


class Record(TypedDict):
    """One version of a record. ``trust`` is always ``"untrusted"``: content is data."""

    id: str
    object: Literal["memory.record"]
    memory_id: str
    type: str
    title: NotRequired[str | None]
    content: list[Part]
    attributes: NotRequired[Json]
    version: int
    status: str
    supersedes: NotRequired[int | None]
    time: NotRequired[Json]
    written_by: Writer
    references: NotRequired[list[Reference]]
    trust: Literal["untrusted"]


class Nav(TypedDict):
    id: str
    name: str
    description: NotRequired[str]
    records: NotRequired[Count]


class RecordList(Page):
    data: list[Record]
    parent: NotRequired[Nav]
    children: NotRequired[list[Nav]]


class PendingReview(TypedDict):
    """A write into a memory that requires review: it became a proposal (202)."""

    object: Literal["memory.pending_review"]
    status: Literal["pending_review"]
    memory_id: NotRequired[str]
    project_id: str
    ref_name: NotRequired[str]
    changeset_id: NotRequired[str]
    proposal_id: str
    target_ref: NotRequired[str]


class Job(TypedDict):
    object: Literal["memory.job"]
    id: str
    status: Literal["pending", "completed", "failed"]
    error: NotRequired[Any]
    data: NotRequired[list[Record]]


class Observed(Page):
    data: list[Record]
    job: NotRequired[Job]


class Erasure(TypedDict):
    object: Literal["memory.erasure"]
    erased: list[str]
    unreachable: list[str]


class File(TypedDict):
    id: str
    object: NotRequired[str]
    name: str
    media_type: str
    bytes: int
    sha256: NotRequired[str]


class Hit(TypedDict):
    record: Record
    memory: Nav
    score: NotRequired[float | None]
    why: NotRequired[list[str]]


class RecallResult(TypedDict):
    """A subtree recall: each hit names the memory it was found in; ``degraded`` lists what
    was asked and not done."""

    object: NotRequired[str]
    results: list[Hit]
    parent: NotRequired[Nav]
    children: NotRequired[list[Nav]]
    degraded: list[str]
    abstain: bool


class GraphResult(TypedDict):
    object: Literal["memory.graph"]
    nodes: list[Json]
    edges: list[Json]
    truncated: NotRequired[bool]
    degraded: NotRequired[list[str]]


class Prime(TypedDict):
    object: NotRequired[str]
    memory_id: str
    text: str
    tokens: int
    budget: NotRequired[int]
    records: NotRequired[list[str]]
    truncated: NotRequired[bool]


class Query(TypedDict):
    name: str
    description: NotRequired[str]
    requires: NotRequired[str]
    language: NotRequired[str]
    params: NotRequired[Json]
    body: NotRequired[Any]


class QueryList(TypedDict):
    object: Literal["list"]
    data: list[Query]


class Snapshot(TypedDict):
    id: str
    object: Literal["memory.snapshot"]
    memory_id: str
    name: str
    message: NotRequired[str | None]
    at: Any


class SnapshotList(TypedDict):
    object: Literal["list"]
    data: list[Snapshot]


class Consolidation(TypedDict):
    id: str
    object: Literal["memory.consolidation"]
    memory_id: str
    status: str


class ConsolidationList(TypedDict):
    object: Literal["list"]
    data: list[Consolidation]


class HarnessMemories(TypedDict):
    object: Literal["harness.memories"]
    principal: NotRequired[str]
    default_memory_id: NotRequired[str | None]
    observe: NotRequired[bool]
    data: list[Json]


# --- Memory Git (/api/memory) ------------------------------------------------------------------


class Ref(TypedDict):
    project_id: str
    ref_name: str
    head_changeset_id: str | None
    protected: bool
    created_at: NotRequired[str]
    updated_at: NotRequired[str]
    created_by_principal: NotRequired[str]


class Op(TypedDict):
    ordinal: int
    op_type: str
    target_event_id: NotRequired[str]
    resulting_event_id: NotRequired[str]
    payload: NotRequired[Json]


class Changeset(TypedDict):
    changeset_id: str
    schema_version: str
    project_id: str
    ref_name: str
    parent_ids: list[str]
    author_principal: str
    message: str
    created_at: NotRequired[str]
    idempotency_key: str
    ops: list[Op]
    integrity_digest: NotRequired[str]


class ChangesetLog(TypedDict):
    changesets: list[Changeset]
    project: NotRequired[str]
    ref: NotRequired[str]


class AcceptedMemory(TypedDict):
    memory_id: str
    content: str
    kind: NotRequired[str]
    status: str
    source: str


class MemoryContext(TypedDict):
    """``memory-context/v1``: accepted memory at an exact head."""

    project_id: str
    ref_name: str
    head_changeset_id: str | None
    manifest_id: NotRequired[str]
    projection_version: str
    total_active: int
    memories: list[AcceptedMemory]


class Review(TypedDict):
    verdict: str
    reviewer_principal: str
    comment: str
    severity: NotRequired[str]


class Proposal(TypedDict):
    proposal_id: str
    project_id: str
    source_ref: str
    target_ref: str
    status: str
    originator_principal: str
    head_changeset_id: str
    base_changeset_id: NotRequired[str | None]
    proposal_digest: NotRequired[str]
    conflict_ids: NotRequired[list[str]]
    reviews: NotRequired[list[Review]]


class Merge(TypedDict):
    ref: Ref
    advance: Json


class RootCreated(TypedDict):
    changeset: Changeset
    ref: Ref


class ReviewSettings(TypedDict):
    review_required: bool
    reviewed_types: list[str]


__all__ = [
    "AcceptedMemory", "Changeset", "ChangesetLog", "Consolidation", "ConsolidationList",
    "Count", "Deleted", "Erasure", "File", "Grant", "GrantList", "GraphResult",
    "HarnessMemories", "Hit", "Job", "Json", "Memory", "MemoryContext", "MemoryDeleted",
    "MemoryList", "Merge", "Nav", "Observed", "Op", "Page", "Part", "PendingReview", "Prime",
    "Privilege", "Proposal", "Query", "QueryList", "RecallResult", "Record", "RecordList",
    "Ref", "Reference", "Review", "ReviewSettings", "RootCreated", "Snapshot", "SnapshotList",
    "Writer",
]
