"""The UHP Memories routes (``/v1/…``, docs/service.md) as request builders.

Each function builds the :class:`~palimpsest.client.transport.Call` of one route; the clients
(:mod:`palimpsest.client.client`) turn them into methods. Arguments left ``None`` are not
sent, so the server's defaults apply. Every write takes an ``idempotency_key``: the same
request again under the same key returns the first answer and writes nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from palimpsest.client.models import (
    Consolidation,
    ConsolidationList,
    Deleted,
    Erasure,
    File,
    Grant,
    GrantList,
    GraphResult,
    HarnessMemories,
    Job,
    Json,
    Memory,
    MemoryDeleted,
    MemoryList,
    Observed,
    Part,
    PendingReview,
    Prime,
    Query,
    QueryList,
    RecallResult,
    Record,
    RecordList,
    Reference,
    Snapshot,
    SnapshotList,
)
from palimpsest.client.transport import Call, body_of, segment

Content = str | Sequence[Part]


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()  # "leave it as it is", where None means something (a root's parent)


def _m(memory_id: str) -> str:
    return f"/v1/memories/{segment(memory_id)}"


def _r(memory_id: str, record_id: str) -> str:
    return f"{_m(memory_id)}/records/{segment(record_id)}"


def _content(content: Content | None) -> Any:
    return list(content) if content is not None and not isinstance(content, str) else content


# --- discovery -----------------------------------------------------------------------------------


def discovery() -> Call[Json]:
    """``GET /v1/uhp``: protocol version and capabilities."""
    return Call("GET", "/v1/uhp")


def providers() -> Call[Json]:
    """``GET /v1/memories/providers``: what the provider really does."""
    return Call("GET", "/v1/memories/providers")


def types() -> Call[Json]:
    """``GET /v1/memories/types``: record types, core and server-defined."""
    return Call("GET", "/v1/memories/types")


# --- the tree ------------------------------------------------------------------------------------


def create_memory(name: str, *, description: str | None = None, parent_id: str | None = None,
                  restricted: bool | None = None, provider: str | None = None,
                  idempotency_key: str | None = None) -> Call[Memory]:
    """Create a memory: a root, or a child of ``parent_id`` (needs ``create`` there)."""
    return Call("POST", "/v1/memories", body=body_of(
        name=name, description=description, parent_id=parent_id, restricted=restricted,
        provider=provider), idempotency_key=idempotency_key)


def list_memories(*, parent: str | None = None, ancestor: str | None = None,
                  granted: bool | None = None, limit: int | None = None,
                  cursor: str | None = None) -> Call[MemoryList]:
    """One level of the tree: entry points, children (``parent``), every readable descendant
    (``ancestor``) or what was granted (``granted=True``)."""
    return Call("GET", "/v1/memories", query={"parent": parent, "ancestor": ancestor,
                                              "granted": granted, "limit": limit,
                                              "cursor": cursor})


def get_memory(memory_id: str) -> Call[Memory]:
    """One memory with the caller's privileges and counts."""
    return Call("GET", _m(memory_id))


def update_memory(memory_id: str, *, name: str | None = None, description: str | None = None,
                  parent_id: str | _Unset | None = UNSET, restricted: bool | None = None,
                  idempotency_key: str | None = None) -> Call[Memory]:
    """Rename, describe, restrict or move a memory (``parent_id=None`` makes it a root)."""
    body = body_of(name=name, description=description, restricted=restricted)
    if not isinstance(parent_id, _Unset):
        body["parent_id"] = parent_id
    return Call("PUT", _m(memory_id), body=body, idempotency_key=idempotency_key)


def delete_memory(memory_id: str, *, idempotency_key: str | None = None) -> Call[MemoryDeleted]:
    """Delete a memory with its records and every memory below it (needs ``delete``)."""
    return Call("DELETE", _m(memory_id), idempotency_key=idempotency_key)


# --- grants --------------------------------------------------------------------------------------


def list_grants(memory_id: str) -> Call[GrantList]:
    """The grants on a memory and those it inherits (down to a restricted cutoff)."""
    return Call("GET", f"{_m(memory_id)}/grants")


def put_grant(memory_id: str, principal: str, privileges: Sequence[str], *,
              idempotency_key: str | None = None) -> Call[Grant]:
    """Grant ``principal`` (``member:ID`` or ``group:ID``) privileges on a memory (replaces
    its earlier grant there)."""
    return Call("POST", f"{_m(memory_id)}/grants",
                body={"principal": principal, "privileges": list(privileges)},
                idempotency_key=idempotency_key)


def delete_grant(memory_id: str, grant_id: str, *,
                 idempotency_key: str | None = None) -> Call[Deleted]:
    """Remove one grant (needs ``delete``)."""
    return Call("DELETE", f"{_m(memory_id)}/grants/{segment(grant_id)}",
                idempotency_key=idempotency_key)


# --- records -------------------------------------------------------------------------------------


def remember(memory_id: str, content: Content | None = None, *, type: str | None = None,
             title: str | None = None, attributes: Json | None = None,
             references: Sequence[Reference] | None = None, time: Json | None = None,
             idempotency_key: str | None = None) -> Call[Record | PendingReview]:
    """Remember a record (a string is one text part). In a memory that requires review an
    agent's write becomes a proposal (:class:`~palimpsest.client.models.PendingReview`)."""
    return Call("POST", f"{_m(memory_id)}/records", body=body_of(
        type=type, title=title, content=_content(content), attributes=attributes,
        references=list(references) if references is not None else None, time=time),
        idempotency_key=idempotency_key)


def list_records(memory_id: str, *, type: str | None = None, include: str | None = None,
                 as_of: str | None = None, limit: int | None = None,
                 cursor: str | None = None) -> Call[RecordList]:
    """Records of one memory (``include="all"`` adds superseded and forgotten ones)."""
    return Call("GET", f"{_m(memory_id)}/records", query={
        "type": type, "include": include, "as_of": as_of, "limit": limit, "cursor": cursor})


def get_record(memory_id: str, record_id: str, *, as_of: str | None = None) -> Call[Record]:
    """One record, as it is or as it was at ``as_of``."""
    return Call("GET", _r(memory_id, record_id), query={"as_of": as_of})


def record_history(memory_id: str, record_id: str) -> Call[RecordList]:
    """Every version of a record, oldest first."""
    return Call("GET", f"{_r(memory_id, record_id)}/history")


def record_content(memory_id: str, record_id: str, index: int) -> Call[bytes]:
    """The bytes of a record's file part ``index``."""
    return Call("GET", f"{_r(memory_id, record_id)}/content/{index}", raw=True)


def revise(memory_id: str, record_id: str, *, content: Content | None = None,
           title: str | None = None, attributes: Json | None = None,
           references: Sequence[Reference] | None = None, time: Json | None = None,
           idempotency_key: str | None = None) -> Call[Record]:
    """A new version of a record (the old one stays in its history)."""
    return Call("PATCH", _r(memory_id, record_id), body=body_of(
        title=title, content=_content(content), attributes=attributes,
        references=list(references) if references is not None else None, time=time),
        idempotency_key=idempotency_key)


def forget(memory_id: str, record_id: str, *, idempotency_key: str | None = None) -> Call[Record]:
    """Forget a record; its trace is kept."""
    return Call("DELETE", _r(memory_id, record_id), idempotency_key=idempotency_key)


def erase(memory_id: str, record_ids: Sequence[str], *,
          idempotency_key: str | None = None) -> Call[Erasure]:
    """Remove records' content for good; ``unreachable`` says what could not be erased."""
    return Call("POST", f"{_m(memory_id)}/erase", body={"record_ids": list(record_ids)},
                idempotency_key=idempotency_key)


def operate(memory_id: str, record_id: str, name: str, input: Json | None = None, *,
            idempotency_key: str | None = None) -> Call[Json]:
    """Run a type operation on a record."""
    return Call("POST", f"{_r(memory_id, record_id)}/operations/{segment(name)}",
                body=input or {}, idempotency_key=idempotency_key)


def upload_file(data: bytes, *, media_type: str, name: str | None = None,
                idempotency_key: str | None = None) -> Call[File]:
    """Upload bytes for a file part; name the returned id in a record's content."""
    return Call("POST", "/v1/files", query={"name": name}, content=data,
                content_type=media_type, idempotency_key=idempotency_key)


def observe(memory_id: str, episodes: Sequence[Json], *,
            idempotency_key: str | None = None) -> Call[Observed]:
    """The episodes of a turn (each ``{content, attributes?}``)."""
    return Call("POST", f"{_m(memory_id)}/observe", body={"episodes": list(episodes)},
                idempotency_key=idempotency_key)


def get_job(memory_id: str, job_id: str) -> Call[Job]:
    """A deferred observe job."""
    return Call("GET", f"{_m(memory_id)}/jobs/{segment(job_id)}")


# --- recall, graph, prime ------------------------------------------------------------------------


def recall(memory_id: str, text: str | None = None, *, query: str | None = None,
           filters: Json | None = None, types: Sequence[str] | None = None,
           depth: int | None = None, limit: int | None = None, as_of: str | None = None,
           include: str | None = None, include_pending: bool | None = None,
           provenance: Json | str | None = None) -> Call[RecallResult]:
    """Ask a memory and every readable memory below it; each hit names its memory.
    ``provenance``: a trust filter (``{"reviewed_by_other": true, "written_by": "human",
    "signed_by": key}`` or its string form; docs/provenance.md)."""
    body = body_of(text=text, query=query, filters=filters,
                   types=list(types) if types is not None else None, depth=depth, limit=limit,
                   as_of=as_of, include=include)
    if include_pending is not None:
        body["x.pal.include_pending"] = include_pending
    if provenance is not None:
        body["x.pal.provenance"] = provenance
    return Call("POST", f"{_m(memory_id)}/recall", body=body)


def graph(memory_id: str, *, around: str | None = None, hops: int | None = None,
          types: Sequence[str] | None = None, limit: int | None = None) -> Call[GraphResult]:
    """Entities, facts and the references between them."""
    return Call("POST", f"{_m(memory_id)}/graph", body=body_of(
        around=around, hops=hops, types=list(types) if types is not None else None,
        limit=limit))


def prime(memory_id: str, budget: int, *, provenance: str | None = None) -> Call[Prime]:
    """The memory's standing records within ``budget`` tokens, fenced as data; ``provenance``
    a trust filter's string form (``any``: also unreviewed agent writes where review is
    required)."""
    query: dict[str, Any] = {"budget": budget}
    if provenance is not None:
        query["provenance"] = provenance
    return Call("GET", f"{_m(memory_id)}/prime", query=query)


# --- queries, snapshots, consolidations, harnesses -----------------------------------------------


def list_queries(memory_id: str) -> Call[QueryList]:
    """The memory's named queries."""
    return Call("GET", f"{_m(memory_id)}/queries")


def put_query(memory_id: str, name: str, *, language: str, body: Json | str,
              description: str | None = None, params: Json | None = None,
              requires: str | None = None, idempotency_key: str | None = None) -> Call[Query]:
    """Define (or replace) a named query."""
    return Call("PUT", f"{_m(memory_id)}/queries/{segment(name)}", body=body_of(
        language=language, body=body, description=description, params=params,
        requires=requires), idempotency_key=idempotency_key)


def run_query(memory_id: str, name: str, params: Json | None = None) -> Call[RecallResult]:
    """Run a named query."""
    return Call("POST", f"{_m(memory_id)}/queries/{segment(name)}",
                body={"params": params or {}})


def free_query(memory_id: str, language: str, statement: str, *, params: Json | None = None,
               write: bool | None = None) -> Call[Json]:
    """A free query (refused with ``memory_unsupported`` by a provider that offers none)."""
    return Call("POST", f"{_m(memory_id)}/query", body=body_of(
        language=language, statement=statement, params=params, write=write))


def create_snapshot(memory_id: str, name: str, *, message: str | None = None,
                    idempotency_key: str | None = None) -> Call[Snapshot]:
    """Name the current instant of a memory."""
    return Call("POST", f"{_m(memory_id)}/snapshots", body=body_of(name=name, message=message),
                idempotency_key=idempotency_key)


def list_snapshots(memory_id: str) -> Call[SnapshotList]:
    """Snapshots, newest first."""
    return Call("GET", f"{_m(memory_id)}/snapshots")


def consolidate(memory_id: str, *, budget: int | None = None,
                idempotency_key: str | None = None) -> Call[Consolidation]:
    """Run the deterministic consolidator."""
    return Call("POST", f"{_m(memory_id)}/consolidations", body=body_of(budget=budget),
                idempotency_key=idempotency_key)


def list_consolidations(memory_id: str) -> Call[ConsolidationList]:
    """Consolidation runs, newest first."""
    return Call("GET", f"{_m(memory_id)}/consolidations")


def get_consolidation(memory_id: str, run_id: str) -> Call[Consolidation]:
    """One consolidation run."""
    return Call("GET", f"{_m(memory_id)}/consolidations/{segment(run_id)}")


def consolidation_changes(memory_id: str, run_id: str) -> Call[Json]:
    """What a run changed: ``{data: [{change, record}]}``."""
    return Call("GET", f"{_m(memory_id)}/consolidations/{segment(run_id)}/changes")


def revert_consolidation(memory_id: str, run_id: str, *,
                         idempotency_key: str | None = None) -> Call[Consolidation]:
    """Revert a run (appends; nothing is rewritten)."""
    return Call("POST", f"{_m(memory_id)}/consolidations/{segment(run_id)}/revert", body={},
                idempotency_key=idempotency_key)


def harness_memories(harness_id: str) -> Call[HarnessMemories]:
    """The memories a harness's agent holds, and its default memory."""
    return Call("GET", f"/v1/harnesses/{segment(harness_id)}/memories")


def set_harness_memories(harness_id: str, *, default_memory_id: str | None = None,
                         observe: bool | None = None,
                         idempotency_key: str | None = None) -> Call[HarnessMemories]:
    """Set a harness's default memory and whether its turns are observed."""
    return Call("PUT", f"/v1/harnesses/{segment(harness_id)}/memories",
                body=body_of(default_memory_id=default_memory_id, observe=observe),
                idempotency_key=idempotency_key)


# --- operations (no credential needed) -----------------------------------------------------------


def health() -> Call[Json]:
    """``GET /healthz``: the process answers (liveness; says nothing else)."""
    return Call("GET", "/healthz")


def ready() -> Call[Json]:
    """``GET /readyz``: the store answers (readiness); 503 while it does not."""
    return Call("GET", "/readyz")


def metrics() -> Call[bytes]:
    """``GET /metrics``: the Prometheus text exposition."""
    return Call("GET", "/metrics", raw=True)
