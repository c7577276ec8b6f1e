"""Memory Git changesets and their eight operations (memory-git.md §3, §4, §6) — pure.

What lives here: the op vocabulary and boundary validation of a create request (closed payload
keys per op, types, size caps) into the service's one :class:`~palimpsest.service.model.Op`
model, the request's normalised form (its digest is :func:`history.request_digest`, as for
every write), and derived ids. Replay into accepted memory (semantic checks against the parent
state) is :mod:`.projection`.

Validation runs twice by design (memory-git.md §13 step 3): :func:`parse_request` at the HTTP
boundary, and :func:`apply_changeset` again over the stored op values immediately before the
storage transaction makes the changeset immutable.

What does not live here: SQL, refs, CAS (see :mod:`palimpsest.service.gitstore`), diffs and
conflicts (:mod:`palimpsest.service.memorygit.diff`).
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from palimpsest import canonical
from palimpsest.errors import InvalidInput
from palimpsest.service.model import SCHEMA_VERSION, Op, sort_keys
from palimpsest.text import trim_space

OP_TYPES = (
    "add_memory", "add_relationship", "correct_memory", "supersede_memory", "mark_duplicate",
    "propose_deprecation", "attach_evidence", "attach_verification",
)
_COMMON = frozenset({"summary", "project_id", "topic_id", "actor_id", "from_visibility",
                     "to_visibility"})
_PROVENANCE = frozenset({"reviewer", "proposal_id", "source_changeset_id", "rejected_from",
                         "cherrypicked_from", "left_branch", "right_branch"})
_CONTENT = frozenset({"content", "kind", "event_type", "scope", "visibility", "tags",
                      "confidence", "fact_key", "subject", "valid_from", "valid_to", "protected",
                      "approval"})
_BASE = _COMMON | _PROVENANCE
ALLOWED_KEYS: dict[str, frozenset[str]] = {
    "add_memory": _BASE | _CONTENT | {"memory_id", "event_id"},
    "correct_memory": _BASE | _CONTENT | {"target_trust", "source_trust"},
    "supersede_memory": _BASE | _CONTENT | {"target_trust", "source_trust", "memory_id",
                                            "event_id"},
    "mark_duplicate": _BASE | {"duplicate_id", "duplicate_of"},
    "add_relationship": _BASE | {"kind", "from_memory_id", "to_memory_id"},
    "propose_deprecation": _BASE | {"reason"},
    "attach_evidence": _BASE | {"kind", "source", "note", "status"},
    "attach_verification": _BASE | {"kind", "source", "note", "status"},
}
KINDS = ("observation", "fact", "decision", "task", "flag", "record")
# The tag that makes an accepted memory a standing record of the service (uhp-memories.md §6.3:
# ``attributes.standing``); a reviewed write tags a standing write with it.
STANDING_TAG = "standing=true"
VISIBILITIES = ("private", "internal", "shared", "public")
LOW_TRUST = ("inference", "model_inference")

# Caps (memory-git.md §4).
MAX_PAYLOAD = 64 * 1024
MAX_CONTENT = 16 * 1024
MAX_LONG = 4 * 1024  # summary, reason, note
MAX_STRING = 1024
MAX_TAGS = 64
MAX_TAG = 128
MAX_BODY = 1 << 20
MAX_OPS = 256
_LONG_KEYS = frozenset({"summary", "reason", "note"})
_PROVENANCE_FIELDS = ("persona_id", "actor_id", "surface", "model", "environment", "session_id",
                      "topic_id", "context_manifest_id")


def _bad(message: str, code: str = "invalid-changeset") -> InvalidInput:
    return InvalidInput(message, code=code)


@dataclass(frozen=True, slots=True)
class ChangesetRequest:
    """A validated create request (``db.CreateChangesetRequest``), before ids are assigned."""

    project_id: str
    ref_name: str
    parent_ids: tuple[str, ...]
    author_principal: str
    message: str
    idempotency_key: str
    ops: tuple[Op, ...]
    provenance: Mapping[str, str] = field(default_factory=dict)
    evidence: tuple[Mapping[str, Any], ...] = ()
    verification: tuple[Mapping[str, Any], ...] = ()
    expected_head: str | None = None
    advance_ref: bool = True
    create_ref_if_missing: bool = False
    protected: bool = False

    def digest_fields(self) -> dict[str, Any]:
        """The normalised request in the reference's request-digest field order (§6)."""
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION, "project_id": self.project_id,
            "ref_name": self.ref_name, "parent_ids": list(self.parent_ids),
            "author_principal": self.author_principal,
        }
        for name in _PROVENANCE_FIELDS:
            out[name] = self.provenance.get(name, "")
        out.update({
            "message": self.message, "idempotency_key": self.idempotency_key,
            "ops": [_request_op(i, op) for i, op in enumerate(self.ops)],
            "evidence": [sort_keys(e) for e in self.evidence],
            "verification": [sort_keys(v) for v in self.verification],
            "expected_head": self.expected_head or "", "advance_ref": self.advance_ref,
            "create_ref_if_missing": self.create_ref_if_missing, "protected": self.protected,
        })
        return out

    def extra(self) -> dict[str, Any]:
        """The optional changeset fields this request sets (provenance, evidence, …)."""
        out: dict[str, Any] = {k: v for k, v in self.provenance.items() if v}
        if self.evidence:
            out["evidence"] = [dict(e) for e in self.evidence]
        if self.verification:
            out["verification"] = [dict(v) for v in self.verification]
        return out


def _request_op(ordinal: int, op: Op) -> dict[str, Any]:
    """An op as the request digest names it (struct order, Go ``omitempty``)."""
    out: dict[str, Any] = {"ordinal": ordinal, "op_type": op.op_type}
    if op.target:
        out["target_event_id"] = op.target
    if op.result:
        out["resulting_event_id"] = op.result
    if op.payload:
        out["payload"] = sort_keys(op.payload)
    return out


# --- boundary validation ---------------------------------------------------------------------
def _string(value: Any, name: str, cap: int = MAX_STRING, *, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise _bad(f"{name} must be a string")
    if required and not trim_space(value):
        raise _bad(f"{name} is required")
    if len(value.encode("utf-8")) > cap:
        raise _bad(f"{name} exceeds {cap} bytes", code="too-large")
    return value


def _normalise_payload(op_type: str, payload: Any, where: str) -> dict[str, Any] | None:
    if payload is None:
        return None
    if not isinstance(payload, dict):
        raise _bad(f"{where}.payload must be an object")
    allowed = ALLOWED_KEYS[op_type]
    for key in sorted(payload):
        if key not in allowed:
            raise _bad(f"{where}.payload key {key!r} is not allowed for {op_type}",
                       code="unknown-payload-key")
    out: dict[str, Any] = {}
    for key, value in payload.items():
        name = f"{where}.payload.{key}"
        if key == "content":
            out[key] = _string(value, name, MAX_CONTENT)
        elif key == "tags":
            if not isinstance(value, list) or len(value) > MAX_TAGS:
                raise _bad(f"{name} must be an array of at most {MAX_TAGS} strings")
            for tag in value:
                if not isinstance(tag, str) or not trim_space(tag):
                    raise _bad(f"{name} holds an empty or non-string tag")
                if len(tag.encode("utf-8")) > MAX_TAG:
                    raise _bad(f"{name} holds a tag over {MAX_TAG} bytes", code="too-large")
            out[key] = list(value)
        elif key == "confidence":
            out[key] = _confidence(value, name)
        elif key == "protected":
            if not isinstance(value, bool):
                raise _bad(f"{name} must be true or false")
            out[key] = value
        else:
            out[key] = _string(value, name, MAX_LONG if key in _LONG_KEYS else MAX_STRING)
    if len(canonical.encode(sort_keys(out))) > MAX_PAYLOAD:
        raise _bad(f"{where}.payload exceeds {MAX_PAYLOAD} bytes", code="too-large")
    return out


def _confidence(value: Any, name: str) -> int | float:
    # Floats are kept only where Python's shortest repr equals Go's ('f' format above 1e-4),
    # so digests match Go json.Marshal byte for byte; 0.0 and 1.0 become the integers Go prints.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(f"{name} must be a number in [0, 1]")
    if not math.isfinite(value) or not 0 <= value <= 1:
        raise _bad(f"{name} must be a number in [0, 1]")
    if float(value).is_integer():
        return int(value)
    if value < 1e-4:
        raise _bad(f"{name} below 0.0001 must be written as 0")
    return float(value)


def parse_ops(raw: Any) -> tuple[Op, ...]:
    """Validate the ``ops`` array shape, keys and caps; ordinals become the 0-based index.

    Raises:
        InvalidInput: empty or invalid ops, unknown op types or payload keys, oversize values.
    """
    if not isinstance(raw, list) or not raw:
        raise _bad("ops must be a non-empty array", code="empty-ops")
    if len(raw) > MAX_OPS:
        raise _bad(f"a changeset holds at most {MAX_OPS} ops", code="too-large")
    ops: list[Op] = []
    for index, item in enumerate(raw):
        where = f"ops[{index}]"
        if not isinstance(item, dict):
            raise _bad(f"{where} must be an object")
        unknown = sorted(set(item) - {"ordinal", "op_type", "target_event_id",
                                      "resulting_event_id", "payload"})
        if unknown:
            raise _bad(f"{where} has unknown field {unknown[0]!r}", code="unknown-field")
        op_type = item.get("op_type")
        if op_type not in OP_TYPES:
            raise _bad(f"{where}.op_type must be one of {', '.join(OP_TYPES)}")
        ordinal = item.get("ordinal", index)
        if isinstance(ordinal, bool) or not isinstance(ordinal, int) or ordinal < 0:
            raise _bad(f"{where}.ordinal must be a non-negative integer")
        ops.append(Op(
            op_type=op_type,
            target=_string(item.get("target_event_id"), f"{where}.target_event_id") or None,
            payload=_normalise_payload(op_type, item.get("payload"), where) or {},
            result=_string(item.get("resulting_event_id"), f"{where}.resulting_event_id")
            or None,
        ))
    return tuple(ops)


def check_stored_op(op_type: str, target: str | None, result: str | None,
                    payload: Mapping[str, Any]) -> None:
    """The second validation, over the exact op about to become immutable: the payload must
    already be in the normal form :func:`parse_ops` produces, ids within their caps.

    Raises:
        InvalidInput: anything :func:`parse_ops` would refuse or would have rewritten.
    """
    if op_type not in OP_TYPES:
        raise _bad(f"unknown op_type {op_type!r}")
    _string(target, "target_event_id")
    _string(result, "resulting_event_id")
    normal = _normalise_payload(op_type, dict(payload), "op") if payload else None
    if (normal or {}) != dict(payload):
        raise _bad(f"{op_type} payload is not in normal form", code="invalid-op")


def _attachments(raw: Any, name: str) -> tuple[Mapping[str, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_OPS:
        raise _bad(f"{name} must be an array of at most {MAX_OPS} objects")
    out = []
    for item in raw:
        if not isinstance(item, dict) or not all(isinstance(v, str) for v in item.values()):
            raise _bad(f"{name} items must be objects of strings")
        if len(canonical.encode(sort_keys(item))) > MAX_LONG:
            raise _bad(f"{name} item exceeds {MAX_LONG} bytes", code="too-large")
        out.append(dict(item))
    return tuple(out)


_REQUEST_KEYS = frozenset({
    "schema_version", "project_id", "ref_name", "parent_ids", "author_principal", "message",
    "idempotency_key", "ops", "evidence", "verification", "expected_head", "advance_ref",
    "create_ref_if_missing", "protected", *_PROVENANCE_FIELDS,
})


def parse_request(body: Any, *, author_principal: str) -> ChangesetRequest:
    """Validate a create-changeset body at the boundary; the author comes from the credential.

    Raises:
        InvalidInput: unknown fields, missing required fields, bad ops or caps (HTTP 400).
    """
    if not isinstance(body, dict):
        raise _bad("the request must be a JSON object")
    unknown = sorted(set(body) - _REQUEST_KEYS)
    if unknown:
        raise _bad(f"unknown request field {unknown[0]!r}", code="unknown-field")
    if body.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise _bad(f"schema_version must be {SCHEMA_VERSION}")
    claimed = body.get("author_principal")
    if claimed is not None and claimed != author_principal:
        raise _bad("author_principal is stamped from your credential; omit it or send your own",
                   code="author-mismatch")
    parents = body.get("parent_ids") or []
    if not isinstance(parents, list) or not all(isinstance(p, str) and p for p in parents):
        raise _bad("parent_ids must be an array of changeset ids")
    flags = {}
    for name, default in (("advance_ref", True), ("create_ref_if_missing", False),
                          ("protected", False)):
        value = body.get(name, default)
        if not isinstance(value, bool):
            raise _bad(f"{name} must be true or false")
        flags[name] = value
    provenance = {name: _string(body.get(name), name) for name in _PROVENANCE_FIELDS}
    return ChangesetRequest(
        project_id=_string(body.get("project_id"), "project_id", required=True),
        ref_name=_string(body.get("ref_name"), "ref_name", required=True),
        parent_ids=tuple(parents),
        author_principal=author_principal,
        message=_string(body.get("message"), "message", MAX_LONG),
        idempotency_key=_string(body.get("idempotency_key"), "idempotency_key", 255,
                                required=True),
        ops=parse_ops(body.get("ops")),
        provenance={k: v for k, v in provenance.items() if v},
        evidence=_attachments(body.get("evidence"), "evidence"),
        verification=_attachments(body.get("verification"), "verification"),
        expected_head=_string(body.get("expected_head"), "expected_head") or None,
        advance_ref=flags["advance_ref"],
        create_ref_if_missing=flags["create_ref_if_missing"],
        protected=flags["protected"],
    )


def assign_ids(project: str, author: str, key: str, ops: tuple[Op, ...]) -> tuple[Op, ...]:
    """Fill ``resulting_event_id`` of creating ops from the payload ids or a stable derived id.

    ``add_memory``/``supersede_memory`` may name the new memory in ``memory_id``, ``event_id``
    or ``resulting_event_id``; they must agree (§4). Otherwise the id is derived from the
    project, author, idempotency key and ordinal — unique because that key is unique per
    (project, author) — so stored ops are self-contained and replay is deterministic.

    Raises:
        InvalidInput: the named ids disagree.
    """
    out = []
    for ordinal, original in enumerate(ops):
        op = original
        if op.op_type in ("add_memory", "supersede_memory", "correct_memory"):
            named = {v for v in (op.result, (op.payload or {}).get("memory_id"),
                                 (op.payload or {}).get("event_id")) if v}
            if len(named) > 1:
                raise _bad(f"ops[{ordinal}]: resulting_event_id, payload.memory_id and "
                           "payload.event_id disagree")
            result = named.pop() if named else derived_id(project, author, key, ordinal)
            op = replace(op, result=result)
        out.append(op)
    return tuple(out)


def derived_id(project: str, author: str, key: str, ordinal: int) -> str:
    """A record id derived from where its op was written (stable under replay), in the one
    record id scheme: ``hrec_`` + 26 lower-case base32 characters (128 bits)."""
    seed = canonical.encode([project, author, key, ordinal])
    raw = base64.b32encode(hashlib.sha256(seed).digest()[:16]).decode("ascii")
    return "hrec_" + raw.rstrip("=").lower()


__all__ = [
    "ALLOWED_KEYS", "KINDS", "LOW_TRUST", "MAX_BODY", "OP_TYPES", "SCHEMA_VERSION",
    "STANDING_TAG", "VISIBILITIES", "ChangesetRequest", "assign_ids", "check_stored_op",
    "derived_id", "parse_ops", "parse_request",
]
