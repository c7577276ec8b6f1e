"""Request bodies of the HTTP face: pydantic models, used only at this edge.

These models check the *shape* of a body (types, required fields, bounds the chapter states) so
that a malformed request is refused with 422 ``memory_invalid`` naming the field, before the
service is called. They are turned into plain dicts (``model_dump(exclude_unset=True)``) and
handed to the service, which owns every rule about meaning (a second subject, a cycle on move,
an unkept media type, the filter's fields). Unknown fields are refused: a server must not
silently ignore part of a request (uhp-memories.md §7).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic.config import JsonDict
from pydantic.json_schema import SkipJsonSchema, WithJsonSchema

from palimpsest.service import wire as bounds
from palimpsest.service.model import CORE_TYPES, SERVER_TYPES

# Bounds are the service's (service/wire.py); the edge only restates them for the OpenAPI, so
# that a request the document calls valid is one the service takes (an id is printable ASCII
# without spaces; a name is not blank and holds no NUL).
Id = Annotated[str, StringConstraints(min_length=1, max_length=bounds.MAX_ID,
                                      pattern=r"^[!-~]+$")]
Name = Annotated[str, StringConstraints(min_length=1, max_length=bounds.MAX_NAME,
                                        pattern=r"^[^\x00]*[^\s\x00][^\x00]*$")]
# A field that may be left out but is never null: the service refuses null there, so the
# document must not offer it.
Absent = SkipJsonSchema[None]


def _integral(value: Any) -> Any:
    """JSON has one number type: 3.0 is the integer 3 (JSON Schema agrees); 3.5 stays a
    float and is refused by the strict integer check."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


# A free JSON value (attributes, filter values, query parameters): any JSON, but numbers within
# what the body decoder takes (canonical.py refuses integers past 20 digits; the store keeps
# 64-bit integers), so the document offers nothing the server refuses. A component, since it
# nests (app.py adds it as #/components/schemas/JsonValue).
INT64: Final = (-(2**63), 2**63 - 1)
JSON_VALUE_SCHEMA: Final[JsonDict] = {"anyOf": [
    {"type": "string"}, {"type": "boolean"}, {"type": "null"},
    {"type": "number", "minimum": INT64[0], "maximum": INT64[1]},
    {"type": "array", "items": {"$ref": "#/components/schemas/JsonValue"}},
    {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/JsonValue"}}]}
# pydantic resolves a $ref itself, so the models carry this marker, which app.py replaces
# with the reference to the component
JSON_VALUE_MARK: Final = "x-pal-json-value"
JsonValue = Annotated[Any, WithJsonSchema({JSON_VALUE_MARK: True})]
REF_MARK: Final = "x-pal-ref"  # {REF_MARK: "Name"}: replaced by a reference to that schema


# After the bounds of an integer (so the document carries them as minimum and maximum).
INTEGRAL: Final = BeforeValidator(_integral)
# A core type, a server type or an x.-prefixed extension (service/wire.py record_type).
TYPE_PATTERN: Final = (r"^(?:" + "|".join((*CORE_TYPES, *SERVER_TYPES))
                       + r"|x\.[A-Za-z0-9_.\-]{1,64})$")
TypeName = Annotated[str, StringConstraints(pattern=TYPE_PATTERN)]
Text = Annotated[str, StringConstraints(max_length=bounds.MAX_TEXT, pattern=r"^[^\x00]*$")]
Description = Annotated[str, StringConstraints(max_length=bounds.MAX_DESCRIPTION)]
Privilege = Literal["read", "write", "create", "delete"]
# The one provider a memory can be created with; another is the service's to refuse
# (memory_unsupported, as the chapter says), so only the document names it.
Provider = Annotated[str, WithJsonSchema({"type": "string", "enum": ["builtin"]})]
Role = Literal["user", "assistant", "system", "tool"]


class Strict(BaseModel):
    """Base: unknown fields refused, no silent coercion of types."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Open(BaseModel):
    """Base for objects the chapter carries unchanged (``x.`` parts)."""

    model_config = ConfigDict(extra="allow", strict=True)


# An RFC 3339 instant with a time zone (the service parses it; the document says which).
Instant = Annotated[str, StringConstraints(min_length=1, max_length=64),
                    WithJsonSchema({"type": "string", "format": "date-time", "maxLength": 64})]


# --- the tree and grants -------------------------------------------------------------------


class MemoryCreate(Strict):
    """``POST /v1/memories``."""

    name: Name
    description: Description = ""
    parent_id: Id | None = None
    restricted: bool = False
    provider: Provider | None = None


class MemoryUpdate(Strict):
    """``PUT /v1/memories/{id}``: rename, describe, restrict, move (``parent_id`` null: to the
    top); ``provider`` only restates the one it has."""

    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"required": [name]} for name in ("name", "description", "parent_id", "restricted")]})

    name: Name | Absent = None
    description: Description | None = None
    parent_id: Id | None = None
    restricted: bool | Absent = None
    provider: Provider | Absent = None


class GrantPut(Strict):
    """``POST /v1/memories/{id}/grants``: one grant per principal per node."""

    principal: Annotated[str, StringConstraints(min_length=3, max_length=bounds.MAX_ID + 16,
                                                pattern=r"^(?:member|group):[!-~]{1,128}$")]
    privileges: Annotated[list[Privilege], Field(min_length=1, max_length=4)]


# --- records -------------------------------------------------------------------------------


class TextPart(Strict):
    """``{"type": "text", "text": …}``."""

    type: Literal["text"]
    text: Text
    role: Role | Absent = None


class FileRefIn(Strict):
    """The uploaded file a part names; the server fills the rest."""

    id: Id


class FilePart(Strict):
    """``{"type": "file", "file": {"id"}, "text"?, "text_source"?}``."""

    type: Literal["file"]
    file: FileRefIn
    text: Text | None = None
    text_source: Literal["stated", "derived"] | None = None
    role: Role | Absent = None


class ExtensionPart(Open):
    """Any ``x.``-prefixed part kind, carried unchanged."""

    type: Annotated[str, StringConstraints(pattern=r"^x\.[A-Za-z0-9._-]{1,100}$")]
    __pydantic_extra__: dict[str, JsonValue]  # its other fields: any JSON the decoder takes


Part = TextPart | FilePart | ExtensionPart
Content = Text | Annotated[list[Part], Field(max_length=bounds.MAX_PARTS)]


class ReferenceIn(Strict):
    """An edge ``{rel, memory_id?, record_id}``; writing one needs no read on its target."""

    rel: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    memory_id: Id | None = None
    record_id: Id


class TimeIn(Strict):
    """Validity the writer states; the server clocks ``written_at``."""

    valid_from: Instant | None = None
    valid_to: Instant | None = None


Attributes = Annotated[dict[str, JsonValue], Field(max_length=200)]
References = Annotated[list[ReferenceIn], Field(max_length=bounds.MAX_REFERENCES)]


_NOT_BLANK: Final[JsonDict] = {"type": "string", "pattern": r"[^\s\x00]"}
_SOME_CONTENT: Final[JsonDict] = {"anyOf": [{"type": "string"}, {"type": "array", "minItems": 1}]}
# "a record needs content or a title": content (a string, or at least one part) or a title
# that is not blank. The service says so; the document says it too.
_CONTENT_OR_TITLE: Final[JsonDict] = {"anyOf": [
    {"required": ["content"], "properties": {"content": _SOME_CONTENT}},
    {"required": ["title"], "properties": {"title": _NOT_BLANK}}]}


class Remember(Strict):
    """``POST /v1/memories/{id}/records``; ``written_by`` is stamped, never supplied."""

    model_config = ConfigDict(json_schema_extra=_CONTENT_OR_TITLE)

    type: TypeName | None = None
    title: Annotated[str, StringConstraints(max_length=bounds.MAX_TITLE)] | None = None
    content: Content | None = None
    attributes: Attributes | None = None
    references: References | None = None
    time: TimeIn | None = None


class Revise(Strict):
    """``PATCH …/records/{rid}``: at least one field (checked by the service → 422)."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    title: Annotated[str, StringConstraints(max_length=bounds.MAX_TITLE)] | None = None
    content: Content | None = None
    attributes: Attributes | None = None
    references: References | None = None
    time: TimeIn | None = None


class Episode(Strict):
    """One observed turn; ``time.valid_from`` is when it was said (what a question naming a
    date is matched against), ``title`` as for a record (the service's episode fields)."""

    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"properties": {"content": _SOME_CONTENT}},
        {"required": ["title"], "properties": {"title": _NOT_BLANK}}]})

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


_NUMBER: Final[JsonDict] = {"type": "number", "minimum": INT64[0], "maximum": INT64[1]}
_SCALAR: Final[JsonDict] = {"anyOf": [{"type": "string"}, {"type": "boolean"}, {"type": "null"},
                                      _NUMBER]}
_NOT_OBJECT: Final[JsonDict] = {"anyOf": [*_SCALAR["anyOf"], {"type": "array",  # type: ignore[misc]
                                                              "items": _SCALAR}]}
# What the service takes as a condition's value, by operator (service/wire.py _filter).
_CONDITION_VALUES: Final[JsonDict] = {"anyOf": [
    {"required": ["value"], "properties": {"op": {"const": "in"}, "value": {
        "type": "array", "minItems": 1, "maxItems": 100, "items": _SCALAR}}},
    {"required": ["value"], "properties": {"op": {"enum": ["gte", "lte", "gt", "lt"]},
                                           "value": {"anyOf": [{"type": "string"}, _NUMBER]}}},
    {"required": ["value"], "properties": {"op": {"enum": ["eq", "ne", "contains"]},
                                           "value": _NOT_OBJECT}},
    {"properties": {"op": {"const": "exists"}, "value": _NOT_OBJECT}}]}


class Condition(Strict):
    """``{field, op, value}`` over ``type``, ``attributes.*`` or ``time.*`` (``value`` may be
    left out only for ``exists``)."""

    model_config = ConfigDict(json_schema_extra=_CONDITION_VALUES)

    field: Annotated[str, StringConstraints(max_length=300, pattern=bounds.FIELD_PATTERN)]
    op: FilterOp
    value: JsonValue = None


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


class TrustFilter(Strict):
    """A provenance filter (docs/provenance.md "Trust you can filter by"): what a record's
    version must have to be admitted."""

    reviewed_by_other: bool | Absent = None
    written_by: Literal["human", "agent"] | None = None
    signed_by: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None
    unreviewed_agents: bool | Absent = None


# Its string form (service/provenance/trust.py parse): "any", or words joined by commas.
_TRUST_WORD: Final = (r"(?:reviewed_by_other(?::(?:true|false))?|unreviewed_agents(?::(?:true|"
                      r"false))?|written_by:(?:human|agent)|signed_by:[!-+\--~]{1,128})")
TRUST_PATTERN: Final = rf"^(?:any|{_TRUST_WORD}(?:,{_TRUST_WORD})*)$"
TrustText = Annotated[str, StringConstraints(min_length=1, max_length=400,
                                             pattern=TRUST_PATTERN)]


_RECALL_NEEDS: Final[JsonDict] = {"anyOf": [
    {"required": ["query"], "properties": {"query": _NOT_BLANK}},
    {"required": ["text"], "properties": {"text": _NOT_BLANK}},
    {"required": ["filters"], "properties": {"filters": {"type": "object"}}}]}


class RecallBody(Strict):
    """A recall request as a named query keeps it: at least one of query, text, filters."""

    model_config = ConfigDict(json_schema_extra=_RECALL_NEEDS)

    query: Annotated[str, StringConstraints(max_length=bounds.MAX_QUERY_TEXT)] | None = None
    text: Annotated[str, StringConstraints(max_length=bounds.MAX_QUERY_TEXT)] | None = None
    filters: Filter | None = None
    types: Types | None = None
    as_of: Instant | None = None
    include: Literal["active", "all"] | None = None  # a named query's records: one status
    depth: Annotated[int, Field(ge=0, le=1000), INTEGRAL] | None = None
    limit: Annotated[int, Field(ge=1, le=bounds.MAX_RECALL_LIMIT), INTEGRAL] | Absent = None


class Recall(RecallBody):
    """``POST /v1/memories/{id}/recall``: at least one of query, text, filters (service → 422)."""

    include: Literal["active", "all"] | IncludeList | None = None  # type: ignore[assignment]
    # Extension (docs/memory-git.md): also return the caller's own memory pending review.
    include_pending: bool | None = Field(default=None, alias="x.pal.include_pending")
    # Extension (docs/provenance.md): only records whose provenance has what it names.
    provenance: TrustFilter | TrustText | Absent = Field(default=None, alias="x.pal.provenance")


class Graph(Strict):
    """``POST /v1/memories/{id}/graph``."""

    around: Id | None = None
    hops: Annotated[int, Field(ge=0, le=3), INTEGRAL] = 1
    include: Annotated[list[Literal["provenance"]], Field(max_length=1)] | None = None
    types: Types | None = None
    limit: Annotated[int, Field(ge=1, le=1000), INTEGRAL] = 200


# --- queries, operations, snapshots, consolidations, harness ------------------------------


class QueryDefine(Strict):
    """``PUT /v1/memories/{id}/queries/{name}``."""

    description: Annotated[str, StringConstraints(max_length=4000)] = ""
    params: dict[str, JsonValue] = Field(default_factory=dict)
    requires: Literal["read", "write"] = "read"
    language: Literal["recall"]  # the one language the built-in provider runs
    # language "recall": a recall request whose "$name" strings are replaced by params;
    # a textual language would carry its statement as a string.
    # a recall request (its "$name" strings replaced by params when it runs)
    body: RecallBody


class QueryRun(Strict):
    """``POST /v1/memories/{id}/queries/{name}``."""

    params: dict[str, JsonValue] = Field(default_factory=dict)


class FreeQuery(Strict):
    """``POST /v1/memories/{id}/query``."""

    language: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    statement: Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
    params: dict[str, JsonValue] = Field(default_factory=dict)
    write: bool = False


class SnapshotCreate(Strict):
    """``POST /v1/memories/{id}/snapshots``."""

    name: Name
    message: Annotated[str, StringConstraints(max_length=4000)] | None = None


class Consolidate(Strict):
    """``POST /v1/memories/{id}/consolidations``."""

    budget: Annotated[int, Field(ge=1, le=100_000), INTEGRAL] | Absent = None


class HarnessMemoriesPut(Strict):
    """``PUT /v1/harnesses/{id}/memories``."""

    default_memory_id: Id | None = None
    observe: bool | Absent = None


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
