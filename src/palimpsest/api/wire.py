"""Request bodies of the HTTP face: pydantic models, used only at this edge.

These models check the *shape* of a body (types, required fields, bounds the chapter states) so
that a malformed request is refused with 422 ``memory_invalid`` naming the field, before the
service is called. They are turned into plain dicts (``model_dump(exclude_unset=True)``) and
handed to the service, which owns every rule about meaning (a second subject, a cycle on move,
an unkept media type, the filter's fields). Unknown fields are refused: a server must not
silently ignore part of a request (uhp-memories.md §7).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from palimpsest.service import wire as bounds

# Bounds are the service's (service/wire.py); the edge only restates them for the OpenAPI.
Id = Annotated[str, StringConstraints(min_length=1, max_length=bounds.MAX_ID)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=bounds.MAX_NAME)]
TypeName = Annotated[str, StringConstraints(
    pattern=r"^(?:[a-z][a-z0-9_]{0,63}|x\.[A-Za-z0-9_.\-]{1,64})$")]
Text = Annotated[str, StringConstraints(max_length=bounds.MAX_TEXT)]
Description = Annotated[str, StringConstraints(max_length=bounds.MAX_DESCRIPTION)]
Privilege = Literal["read", "write", "create", "delete"]
Role = Literal["user", "assistant", "system", "tool"]


class Strict(BaseModel):
    """Base: unknown fields refused, no silent coercion of types."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Open(BaseModel):
    """Base for objects the chapter carries unchanged (``x.`` parts)."""

    model_config = ConfigDict(extra="allow", strict=True)


# --- the tree and grants -------------------------------------------------------------------


class MemoryCreate(Strict):
    """``POST /v1/memories``."""

    name: Name
    description: Description = ""
    parent_id: Id | None = None
    restricted: bool = False
    provider: Id | None = None


class MemoryUpdate(Strict):
    """``PUT /v1/memories/{id}``: rename, describe, restrict, move (``parent_id``)."""

    name: Name | None = None
    description: Description | None = None
    parent_id: Id | None = None
    restricted: bool | None = None
    provider: Id | None = None


class GrantPut(Strict):
    """``POST /v1/memories/{id}/grants``: one grant per principal per node."""

    principal: Annotated[str, StringConstraints(min_length=3, max_length=300)]
    privileges: Annotated[list[Privilege], Field(min_length=1, max_length=4)]


# --- records -------------------------------------------------------------------------------


class TextPart(Strict):
    """``{"type": "text", "text": …}``."""

    type: Literal["text"]
    text: Text
    role: Role | None = None


class FileRefIn(Strict):
    """The uploaded file a part names; the server fills the rest."""

    id: Id


class FilePart(Strict):
    """``{"type": "file", "file": {"id"}, "text"?, "text_source"?}``."""

    type: Literal["file"]
    file: FileRefIn
    text: Text | None = None
    text_source: Literal["stated", "derived"] | None = None
    role: Role | None = None


class ExtensionPart(Open):
    """Any ``x.``-prefixed part kind, carried unchanged."""

    type: Annotated[str, StringConstraints(pattern=r"^x\.[A-Za-z0-9._-]{1,100}$")]


Part = TextPart | FilePart | ExtensionPart
Content = Text | Annotated[list[Part], Field(max_length=bounds.MAX_PARTS)]


class ReferenceIn(Strict):
    """An edge ``{rel, memory_id?, record_id}``; writing one needs no read on its target."""

    rel: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    memory_id: Id | None = None
    record_id: Id


class TimeIn(Strict):
    """Validity the writer states; the server clocks ``written_at``."""

    valid_from: Annotated[str, StringConstraints(max_length=64)] | None = None
    valid_to: Annotated[str, StringConstraints(max_length=64)] | None = None


Attributes = Annotated[dict[str, Any], Field(max_length=200)]
References = Annotated[list[ReferenceIn], Field(max_length=bounds.MAX_REFERENCES)]


class Remember(Strict):
    """``POST /v1/memories/{id}/records``; ``written_by`` is stamped, never supplied."""

    type: TypeName | None = None
    title: Annotated[str, StringConstraints(max_length=bounds.MAX_TITLE)] | None = None
    content: Content | None = None
    attributes: Attributes | None = None
    references: References | None = None
    time: TimeIn | None = None


class Revise(Strict):
    """``PATCH …/records/{rid}``: at least one field (checked by the service → 422)."""

    title: Annotated[str, StringConstraints(max_length=bounds.MAX_TITLE)] | None = None
    content: Content | None = None
    attributes: Attributes | None = None
    references: References | None = None
    time: TimeIn | None = None


class Episode(Strict):
    """One observed turn; ``time.valid_from`` is when it was said (what a question naming a
    date is matched against), ``title`` as for a record (the service's episode fields)."""

    content: Content
    attributes: Attributes | None = None
    title: Annotated[str, StringConstraints(max_length=bounds.MAX_TITLE)] | None = None
    time: TimeIn | None = None


class Observe(Strict):
    """``POST /v1/memories/{id}/observe``."""

    episodes: Annotated[list[Episode], Field(min_length=1, max_length=bounds.MAX_EPISODES)]


class Erase(Strict):
    """``POST /v1/memories/{id}/erase``."""

    record_ids: Annotated[list[Id], Field(min_length=1, max_length=1000)]


# --- recall and graph ----------------------------------------------------------------------

FilterOp = Annotated[str, StringConstraints(pattern=f"^(?:{'|'.join(bounds.FILTER_OPS)})$")]


# ``include`` as a list: the status (active | all) and provenance (a receipt on every record).
IncludeList = Annotated[list[Literal["active", "all", "provenance"]], Field(max_length=3)]


class Condition(Strict):
    """``{field, op, value}`` over ``type``, ``attributes.*`` or ``time.*`` (``value`` may be
    left out only for ``exists``)."""

    field: Annotated[str, StringConstraints(min_length=1, max_length=300)]
    op: FilterOp
    value: Any = None


class AndFilter(Strict):
    """``{"and": [filters]}``."""

    and_: Annotated[list[Filter], Field(alias="and", min_length=1, max_length=50)]


class OrFilter(Strict):
    """``{"or": [filters]}``."""

    or_: Annotated[list[Filter], Field(alias="or", min_length=1, max_length=50)]


Filter = Condition | AndFilter | OrFilter
AndFilter.model_rebuild()
OrFilter.model_rebuild()

Types = Annotated[list[TypeName], Field(max_length=32)]
Instant = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class TrustFilter(Strict):
    """A provenance filter (docs/provenance.md "Trust you can filter by"): what a record's
    version must have to be admitted."""

    reviewed_by_other: bool | None = None
    written_by: Literal["human", "agent"] | None = None
    signed_by: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None
    unreviewed_agents: bool | None = None


TrustText = Annotated[str, StringConstraints(min_length=1, max_length=400)]


class Recall(Strict):
    """``POST /v1/memories/{id}/recall``: at least one of query, text, filters (service → 422)."""

    query: Annotated[str, StringConstraints(max_length=bounds.MAX_QUERY_TEXT)] | None = None
    text: Annotated[str, StringConstraints(max_length=bounds.MAX_QUERY_TEXT)] | None = None
    filters: Filter | None = None
    types: Types | None = None
    as_of: Instant | None = None
    include: Literal["active", "all"] | IncludeList | None = None
    depth: Annotated[int, Field(ge=0, le=1000)] | None = None
    limit: Annotated[int, Field(ge=1, le=bounds.MAX_RECALL_LIMIT)] | None = None
    # Extension (docs/memory-git.md): also return the caller's own memory pending review.
    include_pending: bool | None = Field(default=None, alias="x.pal.include_pending")
    # Extension (docs/provenance.md): only records whose provenance has what it names.
    provenance: TrustFilter | TrustText | None = Field(default=None, alias="x.pal.provenance")


class Graph(Strict):
    """``POST /v1/memories/{id}/graph``."""

    around: Id | None = None
    hops: Annotated[int, Field(ge=0, le=3)] = 1
    include: Annotated[list[Literal["provenance"]], Field(max_length=1)] | None = None
    types: Types | None = None
    limit: Annotated[int, Field(ge=1, le=1000)] = 200


# --- queries, operations, snapshots, consolidations, harness ------------------------------


class QueryDefine(Strict):
    """``PUT /v1/memories/{id}/queries/{name}``."""

    description: Annotated[str, StringConstraints(max_length=4000)] = ""
    params: dict[str, Any] = Field(default_factory=dict)
    requires: Literal["read", "write"] = "read"
    language: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    # language "recall": a recall request whose "$name" strings are replaced by params;
    # a textual language would carry its statement as a string.
    body: dict[str, Any] | Annotated[str, StringConstraints(min_length=1, max_length=20_000)]


class QueryRun(Strict):
    """``POST /v1/memories/{id}/queries/{name}``."""

    params: dict[str, Any] = Field(default_factory=dict)


class FreeQuery(Strict):
    """``POST /v1/memories/{id}/query``."""

    language: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    statement: Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
    params: dict[str, Any] = Field(default_factory=dict)
    write: bool = False


class SnapshotCreate(Strict):
    """``POST /v1/memories/{id}/snapshots``."""

    name: Name
    message: Annotated[str, StringConstraints(max_length=4000)] | None = None


class Consolidate(Strict):
    """``POST /v1/memories/{id}/consolidations``."""

    budget: Annotated[int, Field(ge=1, le=10_000_000)] | None = None


class HarnessMemoriesPut(Strict):
    """``PUT /v1/harnesses/{id}/memories``."""

    default_memory_id: Id | None = None
    observe: bool | None = None


# --- provenance ------------------------------------------------------------------------------

B64Key = Annotated[str, StringConstraints(min_length=43, max_length=43)]
B64Sig = Annotated[str, StringConstraints(min_length=86, max_length=86)]


class KeyIn(Strict):
    """``POST /v1/members/me/keys``: an Ed25519 public key, unpadded base64."""

    public_key: B64Key


class SignIn(Strict):
    """``POST …/changesets/{id}/signatures``: the author's signature over the canonical bytes."""

    public_key: B64Key
    signature: B64Sig


def dump(model: BaseModel) -> dict[str, Any]:
    """The fields the client actually sent, under their wire names, as plain JSON values."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


__all__ = [
    "Consolidate",
    "Erase",
    "FreeQuery",
    "GrantPut",
    "Graph",
    "HarnessMemoriesPut",
    "KeyIn",
    "MemoryCreate",
    "MemoryUpdate",
    "Observe",
    "QueryDefine",
    "QueryRun",
    "Recall",
    "Remember",
    "Revise",
    "SignIn",
    "SnapshotCreate",
    "dump",
]
