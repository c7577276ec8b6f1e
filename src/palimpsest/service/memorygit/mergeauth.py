"""Merge authorization ``memory-git-merge/v2``: the signed envelope that advances a protected ref.

The contract is memory-git.md §11.  The envelope has fourteen string fields in a fixed
(signature-critical) order; the HMAC input is the envelope encoded like Go ``encoding/json`` with
HTML escaping off and no trailing newline (:func:`palimpsest.canonical.encode_no_html`); the
signature is the lower-case hex HMAC-SHA256 under the key named by ``key_id``.  The wire form is a
JSON *string* holding ``{"envelope": {…}, "signature": "<hex>"}``.

Verification follows the reference's order and status split: a malformed, expired or mismatched
envelope is :class:`~palimpsest.errors.InvalidInput` (400); an unknown key or a bad signature is
:class:`~palimpsest.errors.Forbidden` (403, always the same message so a prober learns nothing).
Decoded envelopes are re-encoded from their fields, never verified over the received bytes, so
key order and whitespace in the wire JSON do not matter — exactly as upstream, which unmarshals
into a struct before re-marshalling.  Unknown envelope keys are refused (fail closed).

This module is pure: it never stores nonces.  Consuming the nonce belongs to the storage
transaction that also moves the protected ref (memory-git.md §11 "after the checks").
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime

from palimpsest import canonical
from palimpsest.errors import Forbidden, InvalidInput

VERSION = "memory-git-merge/v2"
STRATEGIES = ("fast_forward", "merge_commit", "cherry_pick")
MAX_TTL_NS = 15 * 60 * 1_000_000_000
SKEW_NS = 60 * 1_000_000_000
MIN_KEY_BYTES = 32

_NONCE = re.compile(r"[0-9a-f]{32}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{0,64}")
# RFC 3339 with optional fraction of up to nine digits (Go time.RFC3339Nano parses this); ASCII
# digits only, as Go (a str pattern's \d also matches full-width digits: found by fuzzing).
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})",
    re.ASCII,
)
_BAD = "invalid merge authorization"


@dataclass(frozen=True, slots=True)
class MergeEnvelope:
    """The fourteen signed fields, declared in the reference's signature-critical order."""

    version: str
    project_id: str
    ref_name: str
    expected_head: str
    new_head: str
    proposal_id: str
    proposal_digest: str
    reviewer_principal: str
    merger_principal: str
    strategy: str
    issued_at: str
    expires_at: str
    nonce: str
    key_id: str

    def to_wire(self) -> dict[str, str]:
        """The envelope as an ordered dict (field order is part of the signature)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def signing_bytes(self) -> bytes:
        """The exact HMAC input: Go ``canonical.JSON`` of the envelope."""
        return canonical.encode_no_html(self.to_wire())


FIELD_NAMES = tuple(f.name for f in fields(MergeEnvelope))


@dataclass(frozen=True, slots=True)
class MergeRequest:
    """What the protected-ref merge request says; the envelope must match it field for field."""

    project_id: str
    ref_name: str
    expected_head: str
    new_head: str
    proposal_id: str
    reviewer_principal: str


class KeyRing:
    """HMAC keys by key id, with one active id for signing; all listed ids verify (rotation)."""

    __slots__ = ("_active", "_keys")

    def __init__(self, keys: Mapping[str, bytes], active: str | None = None) -> None:
        """Build a ring; every key must be at least 32 bytes and every id a safe token.

        Raises:
            InvalidInput: a short key, a bad key id, no keys, or an unknown active id.
        """
        if not keys:
            raise InvalidInput("a merge key ring needs at least one key", code="merge-key")
        for key_id, key in keys.items():
            if not _KEY_ID.fullmatch(key_id):
                raise InvalidInput(f"merge key id {key_id!r} is not a safe token", code="merge-key")
            if len(key) < MIN_KEY_BYTES:
                raise InvalidInput(
                    f"merge key {key_id!r} is shorter than {MIN_KEY_BYTES} bytes",
                    code="merge-key",
                    hint="generate one with `pal memory-git keygen`",
                )
        self._keys = dict(keys)
        self._active = next(iter(self._keys)) if active is None else active
        if self._active not in self._keys:
            raise InvalidInput(f"active merge key id {self._active!r} is not in the ring")

    @property
    def active_key_id(self) -> str:
        """The key id new envelopes are signed with."""
        return self._active

    def key_ids(self) -> tuple[str, ...]:
        """Every key id that verifies."""
        return tuple(self._keys)

    def get(self, key_id: str) -> bytes | None:
        """The key for ``key_id``, or None."""
        return self._keys.get(key_id)

    @classmethod
    def from_spec(cls, spec: str, active: str | None = None) -> KeyRing:
        """Parse ``keyid=secret,…`` (the ``CHARON_MERGE_HMAC_KEYS`` form); secrets are UTF-8.

        Raises:
            InvalidInput: an empty entry, a duplicate id, or a key the ring refuses.
        """
        keys: dict[str, bytes] = {}
        for entry in spec.split(","):
            key_id, sep, secret = entry.strip().partition("=")
            if not sep or not secret:
                raise InvalidInput("merge keys must be written keyid=secret,…", code="merge-key")
            if key_id in keys:
                raise InvalidInput(f"merge key id {key_id!r} is listed twice", code="merge-key")
            keys[key_id] = secret.encode("utf-8")
        return cls(keys, active)


def sign(envelope: MergeEnvelope, ring: KeyRing) -> str:
    """Lower-case hex HMAC-SHA256 of the envelope under its ``key_id``.

    Raises:
        Forbidden: the ring has no key with that id.
    """
    key = ring.get(envelope.key_id)
    if key is None:
        raise Forbidden(_BAD, code="merge-authorization")
    return hmac.new(key, envelope.signing_bytes(), hashlib.sha256).hexdigest()


def wire(envelope: MergeEnvelope, signature: str) -> str:
    """The request field value: a JSON string holding the envelope and its signature."""
    doc = {"envelope": envelope.to_wire(), "signature": signature}
    return canonical.encode_no_html(doc).decode("utf-8")


def format_time(epoch_ns: int) -> str:
    """RFC 3339 in UTC with nanoseconds, trailing zeros trimmed (Go ``RFC3339Nano``)."""
    seconds, nanos = divmod(epoch_ns, 1_000_000_000)
    base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    frac = f".{nanos:09d}".rstrip("0") if nanos else ""
    return f"{base}{frac}Z"


def parse_time(text: str, name: str) -> int:
    """Parse RFC 3339 (optional fraction up to 9 digits) into epoch nanoseconds.

    Raises:
        InvalidInput: not RFC 3339.
    """
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise _malformed(f"{name} is not RFC 3339")
    year, month, day, hour, minute, second, frac, zone = match.groups()
    try:
        stamp = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                         tzinfo=UTC)
    except ValueError as exc:
        raise InvalidInput(f"merge authorization {name} is not a valid time",
                           code="merge-authorization") from exc
    offset = 0
    if zone != "Z":
        sign_ = 1 if zone[0] == "+" else -1
        zh, zm = int(zone[1:3]), int(zone[4:6])
        if zh > 23 or zm > 59:
            raise InvalidInput(f"merge authorization {name} has a bad zone",
                               code="merge-authorization")
        offset = sign_ * (zh * 3600 + zm * 60)
    nanos = int((frac or "").ljust(9, "0")) if frac else 0
    return (int(stamp.timestamp()) - offset) * 1_000_000_000 + nanos


def build(
    request: MergeRequest,
    *,
    proposal_digest: str,
    merger_principal: str,
    strategy: str,
    ring: KeyRing,
    now_ns: int,
    ttl_ns: int = 10 * 60 * 1_000_000_000,
    nonce: str | None = None,
) -> tuple[MergeEnvelope, str]:
    """Build and sign an envelope for ``request``; returns ``(envelope, wire string)``.

    Raises:
        InvalidInput: a TTL outside (0, 15 min] or a strategy outside the three.
    """
    if not 0 < ttl_ns <= MAX_TTL_NS:
        raise InvalidInput("merge authorization TTL must be at most 15 minutes")
    if strategy not in STRATEGIES:
        raise InvalidInput(f"unknown merge strategy {strategy!r}", code="merge-strategy")
    envelope = MergeEnvelope(
        version=VERSION,
        project_id=request.project_id,
        ref_name=request.ref_name,
        expected_head=request.expected_head,
        new_head=request.new_head,
        proposal_id=request.proposal_id,
        proposal_digest=proposal_digest,
        reviewer_principal=request.reviewer_principal,
        merger_principal=merger_principal,
        strategy=strategy,
        issued_at=format_time(now_ns),
        expires_at=format_time(now_ns + ttl_ns),
        nonce=nonce if nonce is not None else secrets.token_hex(16),
        key_id=ring.active_key_id,
    )
    signature = sign(envelope, ring)
    return envelope, wire(envelope, signature)


def _malformed(reason: str) -> InvalidInput:
    return InvalidInput(f"merge authorization {reason}", code="merge-authorization")


def decode_wire(text: str) -> tuple[MergeEnvelope, str]:
    """Parse the wire string into an envelope and its signature (no checks beyond shape).

    Raises:
        InvalidInput: not strict JSON, missing or unknown keys, or non-string fields.
    """
    doc = canonical.decode(text.encode("utf-8"), max_bytes=16 * 1024)
    if not isinstance(doc, dict) or set(doc) != {"envelope", "signature"}:
        raise _malformed("must be an object with exactly envelope and signature")
    env, signature = doc["envelope"], doc["signature"]
    if not isinstance(env, dict) or not isinstance(signature, str):
        raise _malformed("has a malformed envelope or signature")
    unknown = sorted(set(env) - set(FIELD_NAMES))
    if unknown:
        raise _malformed(f"has unknown envelope field {unknown[0]!r}")
    missing = [name for name in FIELD_NAMES if name not in env]
    if missing:
        raise _malformed(f"lacks envelope field {missing[0]!r}")
    bad = [name for name in FIELD_NAMES if not isinstance(env[name], str)]
    if bad:
        raise _malformed(f"field {bad[0]!r} must be a string")
    return MergeEnvelope(**{name: env[name] for name in FIELD_NAMES}), signature


def verify(text: str, request: MergeRequest, ring: KeyRing, now_ns: int) -> MergeEnvelope:
    """Verify a wire authorization against the request, in the reference's order (§11).

    Returns the verified envelope; the caller must then consume its nonce atomically with the
    protected ref's compare-and-swap.

    Raises:
        InvalidInput: malformed, expired, not yet valid, or not matching the request (400).
        Forbidden: unknown key id or bad signature (403, ``invalid merge authorization``).
    """
    envelope, signature = decode_wire(text)
    if envelope.version != VERSION:
        raise _malformed(f"version must be {VERSION}")
    key = ring.get(envelope.key_id)
    if key is None:
        raise Forbidden(_BAD, code="merge-authorization")
    expected = hmac.new(key, envelope.signing_bytes(), hashlib.sha256).hexdigest()
    # compare_digest on ASCII str is constant-time; a non-hex signature simply fails.
    if not signature.isascii() or not hmac.compare_digest(expected, signature):
        raise Forbidden(_BAD, code="merge-authorization")
    for name in ("project_id", "ref_name", "expected_head", "new_head", "proposal_id",
                 "reviewer_principal"):
        if getattr(envelope, name) != getattr(request, name):
            raise _malformed(f"{name} does not match the request")
    if not envelope.merger_principal:
        raise _malformed("merger_principal is empty")
    if envelope.strategy not in STRATEGIES:
        raise _malformed(f"strategy must be one of {', '.join(STRATEGIES)}")
    if not _NONCE.fullmatch(envelope.nonce):
        raise _malformed("nonce must be 32 lower-case hex digits")
    if not _DIGEST.fullmatch(envelope.proposal_digest):
        raise _malformed("proposal_digest must be 64 lower-case hex digits")
    issued = parse_time(envelope.issued_at, "issued_at")
    expires = parse_time(envelope.expires_at, "expires_at")
    if issued > now_ns + SKEW_NS:
        raise _malformed("issued_at is in the future")
    if expires <= issued:
        raise _malformed("expires_at must be after issued_at")
    if expires - issued > MAX_TTL_NS:
        raise _malformed("lifetime exceeds 15 minutes")
    if now_ns >= expires + SKEW_NS:
        raise _malformed("has expired")
    return envelope


__all__ = [
    "FIELD_NAMES",
    "MAX_TTL_NS",
    "SKEW_NS",
    "STRATEGIES",
    "VERSION",
    "KeyRing",
    "MergeEnvelope",
    "MergeRequest",
    "build",
    "decode_wire",
    "format_time",
    "parse_time",
    "sign",
    "verify",
    "wire",
]
