"""The signed ``hn-memory/0`` model: envelopes, records, validation, canonical bytes, IDs.

Everything here is pure.  Rules and section numbers refer to shared/reference/hn-memory-v0.md.

Trust rule: a payload is accepted only through :func:`decode_envelope`, which decodes strictly,
validates every field and bound, and requires the canonical re-encoding to equal the received
bytes (§2).  The received bytes are kept; nothing is ever verified by re-serialising.

Empty-string fields and ``None`` both mean "absent" for the ``omitempty`` keys, exactly as Go's
zero values do: a payload that spells ``"target":""`` re-encodes without the key and therefore
fails the canonical comparison.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from palimpsest.canonical import decode_then_compare, encode, encode_tree
from palimpsest.errors import InvalidInput
from palimpsest.hn.ids import (
    ABSENT,
    EVIDENCE,
    FULL_ID,
    HEX64,
    KINDS,
    LEGACY_PROTOCOL,
    MODES,
    OBJECT_ID,
    OPERATIONS,
    PROTOCOL,
    SUBJECT,
    TOKEN,
    blen,
    memory_id,
    valid_path,
)
from palimpsest.identity import b64_nopad, b64_nopad_decode, fingerprint, verifier, weak_key_reason
from palimpsest.text import has_control, is_blank, to_lower, trim_space

MAX_CONTENT_BYTES = 65536
MAX_TOPICS = 32
MAX_TOPIC_BYTES = 128
MAX_EVIDENCE = 64
MAX_PATHS = 128
MAX_TOTAL_PATH_BYTES = 65536
MAX_HANDOFF_ITEMS = 64
MAX_HANDOFF_ITEM_BYTES = 4096
MAX_HANDOFF_BYTES = 65536
MAX_REASON_BYTES = 128
MAX_OUTCOME_BYTES = 64
MAX_ACTOR_NAME_BYTES = 256
MAX_PAYLOAD_BYTES = 512 * 1024
MAX_SIGNATURE_BYTES = 128
MAX_SEQUENCE = 2**64 - 1

_TIMESTAMP = re.compile(  # ASCII: a str pattern's \d would also match "٢" or "２" (Go's does not)
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-](\d{2}):(\d{2}))",
    re.ASCII,
)
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _bad(message: str, code: str = "invalid-memory") -> InvalidInput:
    return InvalidInput(f"invalid memory envelope: {message}", code=code)


# ------------------------------------------------------------------------- model


@dataclass(frozen=True, slots=True)
class PathAnchor:
    """A repository-relative path bound to its exact blob ID, or to ``absent``."""

    path: str
    blob: str


@dataclass(frozen=True, slots=True)
class Anchor:
    """The exact commit a record is about, plus optional paths and typed subject."""

    commit: str
    paths: tuple[PathAnchor, ...] = ()
    subject: str = ""


@dataclass(frozen=True, slots=True)
class Applicability:
    """``exact``, ``descendants`` or ``subject`` (with the subject it applies to)."""

    mode: str
    subject: str = ""


@dataclass(frozen=True, slots=True)
class Handoff:
    """Four separate bounded lists; proposed next actions are inert data."""

    completed: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    blockers: tuple[str, ...] = ()
    next_actions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Record:
    """The record of a ``record`` or ``supersede`` envelope (§4.1)."""

    kind: str
    content: str
    anchor: Anchor
    applicability: Applicability
    topics: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    attempt_outcome: str = ""
    handoff: Handoff | None = None


@dataclass(frozen=True, slots=True)
class Envelope:
    """One signed memory (§3). ``previous``, ``target``, ``reason`` are ``""`` when absent."""

    protocol: str
    operation: str
    actor: str
    actor_name: str
    public_key: str
    stream: str
    sequence: int
    timestamp: str
    previous: str = ""
    record: Record | None = None
    target: str = ""
    reason: str = ""
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class VerifiedMemory:
    """A memory that passed every reader check (§11): the exact bytes and what they say."""

    memory_id: str
    commit: str
    payload: bytes
    envelope: Envelope
    signature: str
    ref: str


# ------------------------------------------------------------------------- wire form


def anchor_wire(anchor: Anchor) -> dict[str, Any]:
    """The anchor object in wire key order."""
    out: dict[str, Any] = {"commit": anchor.commit}
    if anchor.paths:
        out["paths"] = [{"path": p.path, "blob": p.blob} for p in anchor.paths]
    if anchor.subject:
        out["subject"] = anchor.subject
    return out


def handoff_wire(handoff: Handoff) -> dict[str, Any]:
    """The handoff object in wire key order (lists always present)."""
    return {
        "completed": list(handoff.completed),
        "assumptions": list(handoff.assumptions),
        "blockers": list(handoff.blockers),
        "nextActions": list(handoff.next_actions),
    }


def record_wire(
    record: Record, *, sort_evidence: bool = False, nil_empty_evidence: bool = False
) -> dict[str, Any]:
    """The record object in wire key order.

    ``sort_evidence`` and ``nil_empty_evidence`` serve the derived index and recall outputs
    (§16.6, §19.3), which sort ``data.evidence`` and may write an empty list as ``null``.
    """
    applicability: dict[str, Any] = {"mode": record.applicability.mode}
    if record.applicability.subject:
        applicability["subject"] = record.applicability.subject
    evidence = sorted(record.evidence) if sort_evidence else list(record.evidence)
    out: dict[str, Any] = {
        "kind": record.kind,
        "content": record.content,
        "anchor": anchor_wire(record.anchor),
        "applicability": applicability,
        "topics": list(record.topics),
        "evidence": None if (nil_empty_evidence and not evidence) else evidence,
    }
    if record.attempt_outcome:
        out["attemptOutcome"] = record.attempt_outcome
    if record.handoff is not None:
        out["handoff"] = handoff_wire(record.handoff)
    return out


def envelope_wire(envelope: Envelope, *, with_record: bool = True) -> dict[str, Any]:
    """The envelope in canonical key order (§3); ``with_record=False`` leaves out the record
    (show prints author prose only in the projection's ``data``)."""
    out: dict[str, Any] = {
        "protocol": envelope.protocol,
        "operation": envelope.operation,
        "actor": envelope.actor,
        "actorName": envelope.actor_name,
        "publicKey": envelope.public_key,
        "stream": envelope.stream,
        "sequence": envelope.sequence,
        "timestamp": envelope.timestamp,
    }
    if envelope.previous:
        out["previous"] = envelope.previous
    if with_record and envelope.record is not None:
        out["record"] = record_wire(envelope.record)
    if envelope.target:
        out["target"] = envelope.target
    if envelope.reason:
        out["reason"] = envelope.reason
    if envelope.evidence:
        out["evidence"] = list(envelope.evidence)
    return out


def _obj(value: Any, allowed: frozenset[str], where: str) -> dict[str, Any]:
    if value.__class__ is not dict:
        raise _bad(f"{where} must be an object")
    if not value.keys() <= allowed:
        raise _bad(f"unknown field in {where}")  # the name is author data: never echoed
    return value


def _strs(value: Any, where: str, *, required: bool) -> tuple[str, ...]:
    if value is None:
        if required:
            raise _bad(f"{where} must be a list, not null or missing")
        return ()
    if value.__class__ is not list:
        raise _bad(f"{where} must be a list of strings")
    for item in value:
        if item.__class__ is not str:
            raise _bad(f"{where} must be a list of strings")
    return tuple(value)


_ENVELOPE_KEYS = frozenset(
    (
        "protocol", "operation", "actor", "actorName", "publicKey", "stream", "sequence",
        "timestamp", "previous", "record", "target", "reason", "evidence",
    )
)  # fmt: skip
_RECORD_KEYS = frozenset(
    (
        "kind", "content", "anchor", "applicability", "topics", "evidence", "attemptOutcome",
        "handoff",
    )
)  # fmt: skip
_ANCHOR_KEYS = frozenset(("commit", "paths", "subject"))
_PATH_KEYS = frozenset(("path", "blob"))
_APPLICABILITY_KEYS = frozenset(("mode", "subject"))
_HANDOFF_KEYS = frozenset(("completed", "assumptions", "blockers", "nextActions"))


def _strings(obj: dict[str, Any], keys: tuple[str, ...], where: str) -> list[str]:
    """The string fields ``keys`` of ``obj`` (missing or null → ""), type-checked in one pass."""
    get = obj.get
    out = []
    for key in keys:
        value = get(key)
        if value.__class__ is not str:
            if value is not None:
                raise _bad(f"{where}.{key} must be a string")
            value = ""
        out.append(value)
    return out


def anchor_from_wire(value: Any) -> Anchor:
    """Build an anchor from decoded JSON (types and unknown fields checked, not rules)."""
    obj = _obj(value, _ANCHOR_KEYS, "anchor")
    commit, subject = _strings(obj, ("commit", "subject"), "anchor")
    raw_paths = obj.get("paths")
    if raw_paths is None:
        return Anchor(commit, (), subject)
    if not isinstance(raw_paths, list):
        raise _bad("anchor.paths must be a list")
    paths = []
    for item in raw_paths:
        path, blob = _strings(_obj(item, _PATH_KEYS, "anchor path"), ("path", "blob"), "path")
        paths.append(PathAnchor(path, blob))
    return Anchor(commit, tuple(paths), subject)


def handoff_from_wire(value: Any) -> Handoff:
    """Build a handoff from decoded JSON; every list must be present and non-null."""
    obj = _obj(value, _HANDOFF_KEYS, "handoff")
    return Handoff(
        completed=_strs(obj.get("completed"), "handoff.completed", required=True),
        assumptions=_strs(obj.get("assumptions"), "handoff.assumptions", required=True),
        blockers=_strs(obj.get("blockers"), "handoff.blockers", required=True),
        next_actions=_strs(obj.get("nextActions"), "handoff.nextActions", required=True),
    )


_RECORD_STRINGS = ("kind", "content", "attemptOutcome")
_ENVELOPE_STRINGS = (
    "protocol", "operation", "actor", "actorName", "publicKey", "stream", "timestamp",
    "previous", "target", "reason",
)  # fmt: skip


def record_from_wire(value: Any) -> Record:
    """Build a record from decoded JSON."""
    obj = _obj(value, _RECORD_KEYS, "record")
    kind, content, outcome = _strings(obj, _RECORD_STRINGS, "record")
    applicability = _obj(obj.get("applicability"), _APPLICABILITY_KEYS, "applicability")
    mode, subject = _strings(applicability, ("mode", "subject"), "applicability")
    handoff = obj.get("handoff")
    return Record(
        kind,
        content,
        anchor_from_wire(obj.get("anchor")),
        Applicability(mode, subject),
        _strs(obj.get("topics"), "record.topics", required=True),
        _strs(obj.get("evidence"), "record.evidence", required=True),
        outcome,
        None if handoff is None else handoff_from_wire(handoff),
    )


def envelope_from_wire(value: Any) -> Envelope:
    """Build an envelope from decoded JSON (types and unknown fields checked, not rules)."""
    obj = _obj(value, _ENVELOPE_KEYS, "envelope")
    sequence = obj.get("sequence")
    if sequence.__class__ is not int:  # bool is a subclass of int and is refused here too
        raise _bad("sequence must be an integer")
    protocol, operation, actor, name, key, stream, stamp, previous, target, reason = _strings(
        obj, _ENVELOPE_STRINGS, "envelope"
    )
    record = obj.get("record")
    return Envelope(
        protocol,
        operation,
        actor,
        name,
        key,
        stream,
        sequence,
        stamp,
        previous,
        None if record is None else record_from_wire(record),
        target,
        reason,
        _strs(obj.get("evidence"), "evidence", required=False),
    )


# ------------------------------------------------------------------------- validation


def valid_timestamp(text: str) -> bool:
    """True when Go would parse ``text`` as RFC 3339 and format it back identically (§5.4)."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return False
    parts = match.groups()
    year, month, day, hour, minute, second = map(int, parts[:6])
    fraction, zone = parts[6], parts[7]
    if not 1 <= month <= 12 or hour > 23 or minute > 59 or second > 59:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not 1 <= day <= (29 if month == 2 and leap else _DAYS[month - 1]):
        return False
    if fraction is not None and fraction.endswith("0"):
        return False
    if zone != "Z":
        off_hours, off_minutes = int(parts[8]), int(parts[9])
        if off_hours > 23 or off_minutes > 59 or (off_hours == 0 and off_minutes == 0):
            return False
    return True


def _check_evidence_list(items: tuple[str, ...], where: str) -> None:
    if len(items) > MAX_EVIDENCE:
        raise _bad(f"{where} exceeds {MAX_EVIDENCE} entries")
    if len(set(items)) != len(items):
        raise _bad(f"{where} holds a duplicate ID")
    for item in items:
        if not EVIDENCE.fullmatch(item):
            raise _bad(f"{where} holds a malformed typed ID")


def _check_token(value: str, where: str, limit: int) -> None:
    if blen(value) > limit or not TOKEN.fullmatch(value):
        raise _bad(f"{where} must be a token of [a-z0-9-] up to {limit} bytes")


def validate_anchor(anchor: Anchor) -> None:
    """Check §4.3: commit ID, sorted unique clean paths within bounds, typed subject."""
    if not OBJECT_ID.fullmatch(anchor.commit):
        raise _bad("anchor.commit must be a full lower-case object ID")
    if len(anchor.paths) > MAX_PATHS:
        raise _bad(f"anchor.paths exceeds {MAX_PATHS} entries")
    total = 0
    previous = None
    for item in anchor.paths:
        if not valid_path(item.path):
            raise _bad("anchor path is not a clean repository-relative path")
        total += blen(item.path)
        if previous is not None and not previous < item.path:
            raise _bad("anchor.paths must be sorted by path without duplicates")
        previous = item.path
        if item.blob != ABSENT and not OBJECT_ID.fullmatch(item.blob):
            raise _bad("anchor path blob must be a full object ID or absent")
    if total > MAX_TOTAL_PATH_BYTES:
        raise _bad(f"anchor path bytes exceed {MAX_TOTAL_PATH_BYTES}")
    if anchor.subject and not SUBJECT.fullmatch(anchor.subject):
        raise _bad("anchor.subject must be a typed subject ID")


def validate_handoff(handoff: Handoff) -> None:
    """Check §4.2: four bounded lists of non-blank entries and the aggregate byte limit."""
    total = 0
    for name, items in (
        ("completed", handoff.completed),
        ("assumptions", handoff.assumptions),
        ("blockers", handoff.blockers),
        ("nextActions", handoff.next_actions),
    ):
        if len(items) > MAX_HANDOFF_ITEMS:
            raise _bad(f"handoff.{name} exceeds {MAX_HANDOFF_ITEMS} entries")
        for item in items:
            size = blen(item)
            if size > MAX_HANDOFF_ITEM_BYTES:
                raise _bad(f"handoff.{name} entry exceeds {MAX_HANDOFF_ITEM_BYTES} bytes")
            if is_blank(item):
                raise _bad(f"handoff.{name} holds a blank entry")
            total += size
    if total > MAX_HANDOFF_BYTES:
        raise InvalidInput("memory handoff bytes exceed limit", code="invalid-memory")


def validate_record(record: Record) -> None:
    """Check §4.1 and the kind rules."""
    if record.kind not in KINDS:
        raise _bad("record.kind is not a known kind")
    if blen(record.content) > MAX_CONTENT_BYTES:
        raise _bad(f"record.content exceeds {MAX_CONTENT_BYTES} bytes")
    if is_blank(record.content):
        raise _bad("record.content must not be blank")
    validate_anchor(record.anchor)
    mode, subject = record.applicability.mode, record.applicability.subject
    if mode not in MODES:
        raise _bad("applicability.mode must be exact, descendants or subject")
    if mode == "subject":
        if not SUBJECT.fullmatch(subject):
            raise _bad("applicability subject must be a typed subject ID")
        if subject != record.anchor.subject:
            raise _bad("applicability subject must equal anchor.subject")
    elif subject:
        raise _bad(f"applicability {mode} takes no subject")
    if len(record.topics) > MAX_TOPICS:
        raise _bad(f"record.topics exceeds {MAX_TOPICS} entries")
    previous = None
    for topic in record.topics:
        if not topic or blen(topic) > MAX_TOPIC_BYTES:
            raise _bad(f"topics must be 1 to {MAX_TOPIC_BYTES} bytes")
        if topic != to_lower(trim_space(topic)) or has_control(topic):
            raise _bad("topics must be trimmed, lower-case and free of control characters")
        if previous is not None and not previous < topic:
            raise _bad("topics must be sorted without duplicates")
        previous = topic
    _check_evidence_list(record.evidence, "record.evidence")
    if record.kind == "attempt":
        if not record.attempt_outcome:
            raise _bad("an attempt requires attemptOutcome")
        _check_token(record.attempt_outcome, "attemptOutcome", MAX_OUTCOME_BYTES)
    elif record.attempt_outcome:
        raise _bad(f"a {record.kind} takes no attemptOutcome")
    if record.kind == "verification" and not record.evidence:
        raise _bad("a verification requires at least one evidence ID")
    if record.kind == "handoff":
        if record.handoff is None:
            raise _bad("a handoff record requires handoff lists")
        validate_handoff(record.handoff)
    elif record.handoff is not None:
        raise _bad(f"a {record.kind} takes no handoff")


@lru_cache(maxsize=4096)
def _key_actor(public_key: str) -> str:
    """Decode and check a public key once per distinct text (keys repeat along a stream)."""
    try:
        raw_key = b64_nopad_decode(public_key, 32, "public key")
    except InvalidInput as exc:  # one code for every envelope rule (decode_envelope's contract)
        raise _bad("publicKey must be unpadded base64 of 32 bytes") from exc
    reason = weak_key_reason(raw_key)
    if reason is not None:
        raise _bad(reason, "weak-key")
    return fingerprint(raw_key)


@lru_cache(maxsize=4096)
def _check_author(actor: str, name: str, public_key: str, stream: str) -> None:
    """The fields every entry of a stream repeats; checked once per distinct combination
    (exceptions are not cached, so an invalid combination is refused every time)."""
    if not HEX64.fullmatch(actor):
        raise _bad("actor must be 64 lower-case hex characters")
    if is_blank(name) or blen(name) > MAX_ACTOR_NAME_BYTES or has_control(name):
        raise _bad("actorName must be 1 to 256 bytes without control characters")
    if _key_actor(public_key) != actor:
        raise _bad("actor is not the fingerprint of publicKey")
    if not FULL_ID.fullmatch(stream):
        raise _bad("stream must be a full sha256: ID")


def validate_envelope(envelope: Envelope) -> None:
    """Check every envelope rule of §3–§6, including actor = fingerprint(publicKey).

    Raises:
        InvalidInput: code ``invalid-memory`` (``unsupported-protocol`` for ``nh-memory/0``,
            ``weak-key`` for a weak public key) naming the field, never echoing content.
    """
    if envelope.protocol != PROTOCOL:
        if envelope.protocol == LEGACY_PROTOCOL:
            raise _bad("unsupported memory protocol nh-memory/0", "unsupported-protocol")
        raise _bad("protocol must be hn-memory/0", "unsupported-protocol")
    if envelope.operation not in OPERATIONS:
        raise _bad("operation must be record, supersede, retract or challenge")
    _check_author(envelope.actor, envelope.actor_name, envelope.public_key, envelope.stream)
    if not 1 <= envelope.sequence <= MAX_SEQUENCE:
        raise _bad("sequence must be at least 1")
    if not valid_timestamp(envelope.timestamp):
        raise _bad("timestamp must be canonical RFC 3339")
    if envelope.sequence == 1:
        if envelope.previous:
            raise _bad("sequence 1 takes no previous")
    elif not FULL_ID.fullmatch(envelope.previous):
        raise _bad("previous must name the full memory ID of the preceding entry")
    op = envelope.operation
    if op in ("record", "supersede"):
        if envelope.record is None:
            raise _bad(f"{op} requires a record")
        if envelope.reason or envelope.evidence:
            raise _bad(f"{op} takes no reason or envelope evidence")
        if op == "record" and envelope.target:
            raise _bad("record takes no target")
        if op == "supersede" and not FULL_ID.fullmatch(envelope.target):
            raise _bad("supersede requires a full target memory ID")
        validate_record(envelope.record)
        return
    if envelope.record is not None:
        raise _bad(f"{op} takes no record")
    if not FULL_ID.fullmatch(envelope.target):
        raise _bad(f"{op} requires a full target memory ID")
    if not envelope.reason:
        raise _bad(f"{op} requires a reason")
    _check_token(envelope.reason, "reason", MAX_REASON_BYTES)
    if op == "retract" and envelope.evidence:
        raise _bad("retract takes no evidence")
    _check_evidence_list(envelope.evidence, "evidence")


# ------------------------------------------------------------------------- bytes and IDs


def default_stream(actor: str) -> str:
    """The default stream of an actor (§7)."""
    return memory_id(b"hn-memory-stream-v0\x00" + actor.encode("ascii") + b"\x00default")


def encode_envelope(envelope: Envelope) -> bytes:
    """Validate and return the canonical ``memory.json`` bytes."""
    validate_envelope(envelope)
    return encode(envelope_wire(envelope))


def decode_envelope(payload: bytes) -> Envelope:
    """Strictly decode, validate and require canonical bytes (§2 reading order).

    Raises:
        InvalidInput: ``invalid-json`` (``invalid memory JSON``), ``invalid-memory`` or
            ``non-canonical`` (``memory JSON is not canonical``).
    """
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise InvalidInput("memory.json exceeds 524288 bytes", code="invalid-memory")
    if payload[:3] == b"\xef\xbb\xbf":
        raise InvalidInput("invalid memory JSON: byte order mark", code="invalid-json")
    try:
        # Sound only with the byte comparison below: duplicates, constants and whitespace can
        # never re-encode to the same bytes (canonical.decode_then_compare).
        value = decode_then_compare(payload)
    except InvalidInput as exc:
        raise InvalidInput(f"invalid memory JSON: {exc.message}", code="invalid-json") from exc
    envelope = envelope_from_wire(value)
    validate_envelope(envelope)
    try:
        again = encode_tree(envelope_wire(envelope))
    except (InvalidInput, ValueError) as exc:  # a lone surrogate cannot be re-encoded
        raise InvalidInput("invalid memory JSON: lone surrogate", code="invalid-json") from exc
    if again != payload:
        raise InvalidInput("memory JSON is not canonical", code="non-canonical")
    return envelope


def sign_text(signature: bytes) -> str:
    """The ``signature`` file text: 86 bytes of unpadded base64, no newline (§10)."""
    return b64_nopad(signature)


@lru_cache(maxsize=4096)
def _raw_key(public_key: str) -> bytes:
    return b64_nopad_decode(public_key, 32, "public key")


def signature_material(envelope: Envelope, signature_text: str) -> tuple[bytes, bytes]:
    """Every signature check except the curve arithmetic: the canonical encoding of the
    signature file and an acceptable public key.  Returns ``(raw key, raw signature)`` for
    :func:`signature_valid` (which a reader may run later, or in a worker process).

    Raises:
        InvalidInput: ``invalid-signature`` for a bad encoding, ``weak-key`` for a weak key.
    """
    try:
        raw_sig = b64_nopad_decode(signature_text, 64, "signature")
    except InvalidInput as exc:
        raise InvalidInput("invalid signature encoding", code="invalid-signature") from exc
    _key_actor(envelope.public_key)  # refuses weak or malformed keys (cached)
    return _raw_key(envelope.public_key), raw_sig


def signature_valid(raw_key: bytes, raw_sig: bytes, payload: bytes) -> bool:
    """Ed25519 verification of ``raw_sig`` over the exact payload (key already checked)."""
    # Imported here (cached by the import system after the first call): reading memory that
    # is already verified (a warm recall) never loads cryptography.
    from cryptography.exceptions import InvalidSignature  # noqa: PLC0415

    try:
        verifier(raw_key).verify(raw_sig, payload)
    except InvalidSignature:
        return False
    return True


SIGNATURE_FAILED = "memory signature does not verify"


def verify_signature(envelope: Envelope, payload: bytes, signature_text: str) -> None:
    """Verify the signature file over the exact payload with the envelope's key.

    Raises:
        InvalidInput: ``invalid-signature`` for bad encoding or a failed verification,
            ``weak-key`` for a weak key.
    """
    raw_key, raw_sig = signature_material(envelope, signature_text)
    if not signature_valid(raw_key, raw_sig, payload):
        raise InvalidInput(SIGNATURE_FAILED, code="invalid-signature")


__all__ = [
    "ABSENT", "EVIDENCE", "FULL_ID", "HEX64", "KINDS", "LEGACY_PROTOCOL",
    "MODES", "OBJECT_ID", "OPERATIONS", "PROTOCOL", "SIGNATURE_FAILED", "SUBJECT", "TOKEN",
    "Anchor", "Applicability", "Envelope", "Handoff", "PathAnchor", "Record", "VerifiedMemory",
    "anchor_wire", "blen", "decode_envelope", "default_stream", "encode_envelope",
    "envelope_from_wire", "envelope_wire", "memory_id", "record_from_wire", "record_wire",
    "sign_text", "signature_material", "signature_valid", "valid_path", "valid_timestamp",
    "validate_envelope", "validate_record", "verify_signature",
]  # fmt: skip
