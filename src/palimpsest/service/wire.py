"""Validation of wire input (decoded JSON bodies) into the core types of :mod:`model`.

Every function takes an untrusted value and returns a core value or raises
``InvalidInput(code="memory_invalid")`` naming the field (never echoing author content). Bodies
are closed: an unknown key is refused by name, so a typo never silently drops intent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from palimpsest import canonical
from palimpsest.errors import PalError
from palimpsest.service.model import (
    CORE_TYPES,
    PRINCIPAL_KINDS,
    PRIVILEGES,
    ROLES,
    SERVER_TYPES,
    ContentPart,
    FileRef,
    RecordBody,
    Reference,
    invalid,
)

MAX_NAME: Final = 200
MAX_DESCRIPTION: Final = 4000
MAX_TITLE: Final = 300
MAX_TEXT: Final = 64 * 1024
MAX_PARTS: Final = 64
MAX_ATTRIBUTES_BYTES: Final = 16 * 1024
MAX_REFERENCES: Final = 64
MAX_ID: Final = 128
MAX_EPISODES: Final = 100
MAX_FILTER_NODES: Final = 64
MAX_FILTER_DEPTH: Final = 8
MAX_RECALL_LIMIT: Final = 100
MAX_LIST_LIMIT: Final = 200
MAX_QUERY_TEXT: Final = 4000
MAX_KEY: Final = 255
FILTER_OPS: Final = ("eq", "ne", "in", "gte", "lte", "gt", "lt", "contains", "exists")
_TYPE_RE: Final = re.compile(r"(?:[a-z][a-z0-9_]{0,63}|x\.[A-Za-z0-9_.\-]{1,64})")
_FIELD_RE: Final = re.compile(r"(?:type|time\.(?:valid_from|valid_to|written_at)|"
                              r"attributes\.[A-Za-z0-9_\-]{1,64}(?:\.[A-Za-z0-9_\-]{1,64}){0,3})")
QUERY_NAME_RE: Final = re.compile(r"[A-Za-z0-9_]{1,64}")


def obj(value: Any, where: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    """A JSON object whose keys are all in ``allowed``."""
    if not isinstance(value, dict):
        raise invalid(f"{where} must be a JSON object")
    for key in value:
        if key not in allowed:
            raise invalid(f"{where}: unknown field {key!r}", hint=f"allowed: {', '.join(allowed)}")
    return value


def string(value: Any, where: str, *, max_len: int, blank: bool = False) -> str:
    """A string of at most ``max_len`` characters; blank refused unless ``blank``."""
    if not isinstance(value, str):
        raise invalid(f"{where} must be a string")
    if len(value) > max_len:
        raise invalid(f"{where} is longer than {max_len} characters")
    if not blank and not value.strip():
        raise invalid(f"{where} must not be blank")
    if "\x00" in value:
        raise invalid(f"{where} must not contain NUL")
    return value


def opt_string(value: Any, where: str, *, max_len: int) -> str | None:
    """``None`` or a string (blank allowed)."""
    return None if value is None else string(value, where, max_len=max_len, blank=True)


def boolean(value: Any, where: str) -> bool:
    """A JSON boolean (not 0/1)."""
    if not isinstance(value, bool):
        raise invalid(f"{where} must be true or false")
    return value


def integer(value: Any, where: str, *, lo: int, hi: int) -> int:
    """A JSON integer (not a bool) in ``[lo, hi]``."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise invalid(f"{where} must be an integer from {lo} to {hi}")
    return value


def ident(value: Any, where: str) -> str:
    """An opaque id: printable ASCII without spaces, bounded."""
    s = string(value, where, max_len=MAX_ID)
    if not all(33 <= ord(c) < 127 for c in s):
        raise invalid(f"{where} is not a valid id")
    return s


def timestamp(value: Any, where: str) -> str:
    """An RFC 3339 instant, normalised to ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    s = string(value, where, max_len=64)
    try:
        parsed = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise invalid(f"{where} must be an RFC 3339 timestamp") from exc
    if parsed.tzinfo is None:
        raise invalid(f"{where} must carry a time zone (e.g. Z)")
    return iso(parsed)


def iso(moment: datetime) -> str:
    """The one timestamp form the service writes (sortable as text)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as :func:`iso`."""
    return iso(datetime.fromtimestamp(ms / 1000, tz=UTC))


def record_type(value: Any, where: str = "type") -> str:
    """A core type, a server type, or an ``x.``-prefixed extension."""
    s = string(value, where, max_len=70)
    if s in CORE_TYPES or s in SERVER_TYPES or (s.startswith("x.") and _TYPE_RE.fullmatch(s)):
        return s
    raise invalid(f"{where} must be one of {', '.join(CORE_TYPES + SERVER_TYPES)} or x.-prefixed")


def privileges(value: Any) -> frozenset[str]:
    """A non-empty list of the four privileges."""
    if not isinstance(value, list) or not value:
        raise invalid("privileges must be a non-empty list")
    out = set()
    for p in value:
        if p not in PRIVILEGES:
            raise invalid(f"privileges: unknown privilege, use {', '.join(PRIVILEGES)}")
        out.add(p)
    return frozenset(out)


def principal(value: Any, where: str = "principal") -> tuple[str, str]:
    """``member:<id>`` or ``group:<id>`` (the kinds that hold grants)."""
    s = string(value, where, max_len=MAX_ID + 16)
    kind, sep, pid = s.partition(":")
    if not sep or kind not in PRINCIPAL_KINDS:
        raise invalid(f"{where} must be written kind:id with kind member or group")
    if kind == "provider":
        raise invalid(f"{where}: a provider holds no grants")
    return kind, ident(pid, where)


def attributes(value: Any) -> dict[str, Any]:
    """A JSON object of at most 16 KiB canonical JSON."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid("attributes must be a JSON object")
    try:
        size = len(canonical.encode(value))
    except PalError as exc:
        raise invalid("attributes are not encodable JSON") from exc
    if size > MAX_ATTRIBUTES_BYTES:
        raise invalid(f"attributes exceed {MAX_ATTRIBUTES_BYTES} bytes")
    return dict(value)


@dataclass(frozen=True, slots=True)
class PartDraft:
    """A content part as written: a file part names an uploaded file id still to resolve."""

    part: ContentPart
    file_id: str | None = None


def content(value: Any) -> list[PartDraft]:
    """Content: a string (one text part) or an ordered list of parts."""
    if isinstance(value, str):
        return [PartDraft(ContentPart("text", text=string(value, "content", max_len=MAX_TEXT,
                                                            blank=True)))]
    if not isinstance(value, list):
        raise invalid("content must be a string or a list of parts")
    if len(value) > MAX_PARTS:
        raise invalid(f"content has more than {MAX_PARTS} parts")
    return [_part(p, i) for i, p in enumerate(value)]


def _part(value: Any, i: int) -> PartDraft:
    where = f"content[{i}]"
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise invalid(f"{where} must be an object with a type")
    kind = value["type"]
    role = None
    if "role" in value:
        role = value["role"]
        if role not in ROLES:
            raise invalid(f"{where}.role must be one of {', '.join(ROLES)}")
    if kind == "text":
        obj(value, where, ("type", "text", "role"))
        text = string(value.get("text"), f"{where}.text", max_len=MAX_TEXT, blank=True)
        return PartDraft(ContentPart("text", text=text, role=role))
    if kind == "file":
        obj(value, where, ("type", "file", "text", "text_source", "role"))
        ref = value.get("file")
        if isinstance(ref, str):
            file_id = ident(ref, f"{where}.file")
        elif isinstance(ref, dict) and "id" in ref:
            file_id = ident(ref["id"], f"{where}.file.id")
        else:
            raise invalid(f"{where}.file must name an uploaded file id (POST /v1/files)")
        ftext = opt_string(value.get("text"), f"{where}.text", max_len=MAX_TEXT)
        source = value.get("text_source", "stated" if ftext is not None else None)
        if source not in (None, "stated", "derived"):
            raise invalid(f"{where}.text_source must be stated or derived")
        placeholder = FileRef(file_id, "", "", 0, "")
        return PartDraft(ContentPart("file", text=ftext, file=placeholder, text_source=source,
                                     role=role), file_id=file_id)
    if kind.startswith("x.") and len(kind) <= 70:
        try:
            if len(canonical.encode(value)) > MAX_TEXT:
                raise invalid(f"{where} exceeds {MAX_TEXT} bytes")
        except PalError as exc:
            raise invalid(f"{where} is not encodable JSON") from exc
        return PartDraft(ContentPart(kind, raw=dict(value)))
    raise invalid(f"{where}.type must be text, file or x.-prefixed")


def references(value: Any) -> list[Reference]:
    """At most one ``subject`` and one ``object``; rels other than the defined ones
    (``derived_from``, ``part_of``, ``about``, ``subject``, ``object``) are carried unchanged."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_REFERENCES:
        raise invalid(f"references must be a list of at most {MAX_REFERENCES}")
    out: list[Reference] = []
    for i, item in enumerate(value):
        where = f"references[{i}]"
        # An unavailable reference kept unchanged by a reviser arrives without rel.
        ref = obj(item, where, ("rel", "memory_id", "record_id", "available"))
        if ref.get("available") is False and "rel" not in ref:
            continue  # the service keeps the stored edge the reviser cannot read
        rel = string(ref.get("rel"), f"{where}.rel", max_len=64)
        mid = None if ref.get("memory_id") is None else ident(ref["memory_id"],
                                                               f"{where}.memory_id")
        out.append(Reference(rel, mid, ident(ref.get("record_id"), f"{where}.record_id")))
    for rel in ("subject", "object"):
        if sum(1 for r in out if r.rel == rel) > 1:
            raise invalid(f"a record has at most one {rel} reference")
    return out


RECORD_FIELDS: Final = ("type", "title", "content", "attributes", "references", "time")


@dataclass(frozen=True, slots=True)
class RecordDraft:
    """A validated remember/revise body; ``None`` fields were not given (revise keeps them)."""

    type: str | None
    title: str | None
    content: list[PartDraft] | None
    attributes: dict[str, Any] | None
    references: list[Reference] | None
    valid_from: str | None
    valid_to: str | None
    has_time: bool
    has_title: bool


def record_draft(body: Any, *, revise: bool = False) -> RecordDraft:
    """A remember body (content or title required) or a revise patch (≥ 1 field)."""
    allowed = RECORD_FIELDS + (("reason",) if revise else ())
    b = obj(body, "body", allowed)
    if revise:
        if not any(k in b for k in RECORD_FIELDS[1:]):
            raise invalid("a revision needs at least one of title, content, attributes, "
                          "references, time")
        if "type" in b:
            raise invalid("type cannot be revised; remember a new record instead")
    typ = record_type(b["type"]) if b.get("type") is not None else None
    title = opt_string(b.get("title"), "title", max_len=MAX_TITLE)
    parts = content(b["content"]) if b.get("content") is not None else None
    if not revise and not parts and not (title and title.strip()):
        raise invalid("a record needs content or a title")
    if sum(len(p.part.text or "") for p in parts or []) > 4 * MAX_TEXT:
        raise invalid(f"content exceeds {4 * MAX_TEXT} characters")
    valid_from = valid_to = None
    if b.get("time") is not None:
        t = obj(b["time"], "time", ("valid_from", "valid_to", "written_at", "invalidated_at"))
        if t.get("written_at") is not None or t.get("invalidated_at") is not None:
            raise invalid("time.written_at and time.invalidated_at come from the server clock")
        if t.get("valid_from") is not None:
            valid_from = timestamp(t["valid_from"], "time.valid_from")
        if t.get("valid_to") is not None:
            valid_to = timestamp(t["valid_to"], "time.valid_to")
        if valid_from and valid_to and valid_to < valid_from:
            raise invalid("time.valid_to is before time.valid_from")
    return RecordDraft(
        type=typ, title=title, content=parts,
        attributes=attributes(b["attributes"]) if "attributes" in b else None,
        references=references(b["references"]) if "references" in b else None,
        valid_from=valid_from, valid_to=valid_to, has_time="time" in b, has_title="title" in b)


def merge_draft(old: RecordBody | None, draft: RecordDraft,
                parts: tuple[ContentPart, ...] | None) -> RecordBody:
    """The body a write states: a fresh body, or ``old`` patched by ``draft``."""
    if old is None:
        return RecordBody(type=draft.type or "fact", title=draft.title, content=parts or (),
                          attributes=draft.attributes or {},
                          references=tuple(draft.references or ()),
                          valid_from=draft.valid_from, valid_to=draft.valid_to)
    body = RecordBody(
        type=old.type, title=draft.title if draft.has_title else old.title,
        content=parts if parts is not None else old.content,
        attributes=draft.attributes if draft.attributes is not None else old.attributes,
        references=tuple(draft.references) if draft.references is not None
        else old.references,
        valid_from=draft.valid_from if draft.has_time else old.valid_from,
        valid_to=draft.valid_to if draft.has_time else old.valid_to)
    if not body.content and not (body.title and body.title.strip()):
        raise invalid("a record needs content or a title")
    return body


# --- filters -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Cond:
    """``{field, op, value}``."""

    field: str
    op: str
    value: Any


@dataclass(frozen=True, slots=True)
class AllOf:
    """``{and:[…]}``."""

    items: tuple[Filter, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    """``{or:[…]}``."""

    items: tuple[Filter, ...]


Filter = Cond | AllOf | AnyOf


def filter_expr(value: Any) -> Filter:
    """The filters grammar: ``{field, op, value}`` | ``{and:[…]}`` | ``{or:[…]}``."""
    count = [0]
    return _filter(value, "filters", 0, count)


def _filter(value: Any, where: str, depth: int, count: list[int]) -> Filter:
    count[0] += 1
    if depth > MAX_FILTER_DEPTH or count[0] > MAX_FILTER_NODES:
        raise invalid(f"filters nest deeper than {MAX_FILTER_DEPTH} or exceed "
                      f"{MAX_FILTER_NODES} conditions")
    if not isinstance(value, dict):
        raise invalid(f"{where} must be an object")
    for key, cls in (("and", AllOf), ("or", AnyOf)):
        if key in value:
            obj(value, where, (key,))
            items = value[key]
            if not isinstance(items, list) or not items:
                raise invalid(f"{where}.{key} must be a non-empty list")
            return cls(tuple(_filter(x, f"{where}.{key}[{i}]", depth + 1, count)
                             for i, x in enumerate(items)))
    cond = obj(value, where, ("field", "op", "value"))
    fld = string(cond.get("field"), f"{where}.field", max_len=300)
    if not _FIELD_RE.fullmatch(fld):
        raise invalid(f"{where}.field must be type, attributes.<name> or time.<field>")
    op = cond.get("op")
    if op not in FILTER_OPS:
        raise invalid(f"{where}.op must be one of {', '.join(FILTER_OPS)}")
    val = cond.get("value")
    if op == "in" and (not isinstance(val, list) or not val or len(val) > 100):
        raise invalid(f"{where}.value must be a non-empty list for in")
    if op != "exists" and "value" not in cond:
        raise invalid(f"{where}.value is required")
    if op in ("gte", "lte", "gt", "lt") and (isinstance(val, bool)
                                             or not isinstance(val, int | float | str)):
        raise invalid(f"{where}.value must be a number or a string for {op}")
    if isinstance(val, dict):
        raise invalid(f"{where}.value must not be an object")
    try:  # NaN and infinities arrive through MCP's JSON parser; they compare with nothing
        canonical.encode(val)
    except PalError as exc:
        raise invalid(f"{where}.value must be JSON (no NaN or infinities)") from exc
    return Cond(fld, str(op), val)


# --- recall ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RecallRequest:
    """A validated recall body."""

    query: str | None
    text: str | None
    filters: Filter | None
    types: tuple[str, ...] | None
    as_of: str | None
    include: str
    depth: int | None
    limit: int


def recall_request(body: Any) -> RecallRequest:
    """Validate a recall body; at least one of query, text, filters."""
    b = obj(body, "body", ("query", "text", "filters", "types", "as_of", "include", "depth",
                           "limit"))
    query = opt_string(b.get("query"), "query", max_len=MAX_QUERY_TEXT)
    text = opt_string(b.get("text"), "text", max_len=MAX_QUERY_TEXT)
    filters = filter_expr(b["filters"]) if b.get("filters") is not None else None
    if not (query and query.strip()) and not (text and text.strip()) and filters is None:
        raise invalid("recall needs at least one of query, text, filters")
    types = None
    if b.get("types") is not None:
        if not isinstance(b["types"], list) or len(b["types"]) > 32:
            raise invalid("types must be a list of at most 32 types")
        types = tuple(record_type(t, "types[]") for t in b["types"])
    include = b.get("include") or "active"
    if include not in ("active", "all"):
        raise invalid("include must be active or all")
    as_of = timestamp(b["as_of"], "as_of") if b.get("as_of") is not None else None
    depth = integer(b["depth"], "depth", lo=0, hi=1000) if b.get("depth") is not None else None
    limit = integer(b.get("limit", 8), "limit", lo=1, hi=MAX_RECALL_LIMIT)
    return RecallRequest(query, text, filters, types, as_of, include, depth, limit)


def idempotency_key(value: str | None) -> str | None:
    """The ``Idempotency-Key`` header: printable ASCII, at most 255 characters."""
    if value is None:
        return None
    if not value or len(value) > MAX_KEY or not all(32 < ord(c) < 127 for c in value):
        raise invalid("Idempotency-Key must be 1-255 printable ASCII characters")
    return value


__all__ = [name for name in dir() if not name.startswith("_")]
