"""Authoring memories: requests from flags or strict JSON, envelopes, signing, appending.

The capture boundary (requirements 001): only explicit flags, one explicit content argument or
strict version-0 JSON input become memory.  Nothing here reads the environment, a terminal
history, a clipboard or unrelated files.

Request building is pure; :func:`append` is the thin shell that reads the stream head, signs and
appends through :mod:`palimpsest.hn.store` with compare-and-swap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pygit2

from palimpsest.canonical import decode
from palimpsest.errors import Forbidden, InvalidInput
from palimpsest.hn import store
from palimpsest.hn.envelope import (
    ABSENT,
    FULL_ID,
    OBJECT_ID,
    PROTOCOL,
    Anchor,
    Applicability,
    Envelope,
    Handoff,
    PathAnchor,
    Record,
    VerifiedMemory,
    anchor_from_wire,
    default_stream,
    encode_envelope,
    handoff_from_wire,
    memory_id,
    sign_text,
)
from palimpsest.identity import Identity
from palimpsest.text import to_lower, trim_space

MAX_INPUT_BYTES = 1024 * 1024
_REQUEST_KEYS = frozenset(
    (
        "version", "kind", "content", "anchor", "applicability", "topics", "evidence",
        "attemptOutcome", "handoff", "actor", "stream",
    )
)  # fmt: skip


def _bad(message: str) -> InvalidInput:
    return InvalidInput(message, code="invalid-request")


def now_timestamp(ns: int | None = None) -> str:
    """UTC now in Go ``RFC3339Nano`` form: up to 9 fraction digits, trailing zeros dropped."""
    ns = time.time_ns() if ns is None else ns
    seconds, fraction = divmod(ns, 1_000_000_000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    if fraction:
        text += "." + f"{fraction:09d}".rstrip("0")
    return text + "Z"


def normalize_topics(topics: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Trim, lower-case (Go per rune), sort and de-duplicate topic labels."""
    return tuple(sorted({to_lower(trim_space(t)) for t in topics}))


@dataclass(frozen=True, slots=True)
class RecordRequest:
    """What an author asked to record (before stream position, timestamp and signature)."""

    record: Record
    stream: str = ""
    actor: str = ""


def anchor_paths(
    repo: pygit2.Repository, commit: str, paths: list[str], blobs: list[str]
) -> tuple[PathAnchor, ...]:
    """Bind ``--path`` flags to blob IDs read from ``commit`` (``absent`` when missing).

    ``--blob``, when used, is given once per ``--path`` and must match the commit.
    """
    if blobs and len(blobs) != len(paths):
        raise _bad("--blob must be given once per --path")
    probe = store.RepoProbe(repo)
    out: list[PathAnchor] = []
    for index, path in enumerate(paths):
        entry = probe.path_entry(commit, path) if path and not path.startswith("/") else None
        if entry is not None and entry[0] != "blob":
            raise _bad(f"--path {path!r} does not name a file at {commit}")
        actual = entry[1] if entry is not None else ABSENT
        if blobs and blobs[index] != actual:
            raise _bad(f"--blob for --path {path!r} does not match commit {commit}")
        out.append(PathAnchor(path, actual))
    out.sort(key=lambda p: p.path)
    return tuple(out)


def build_record(
    *,
    kind: str,
    content: str,
    anchor: Anchor,
    applies: str,
    topics: list[str] | tuple[str, ...] = (),
    evidence: list[str] | tuple[str, ...] = (),
    outcome: str = "",
    handoff: Handoff | None = None,
) -> Record:
    """A record from flag values; ``--applies subject`` takes the anchor subject."""
    subject = anchor.subject if applies == "subject" else ""
    if applies == "subject" and not subject:
        raise _bad("--applies subject requires --subject")
    return Record(
        kind=kind,
        content=content,
        anchor=anchor,
        applicability=Applicability(applies, subject),
        topics=normalize_topics(topics),
        evidence=tuple(evidence),
        attempt_outcome=outcome,
        handoff=handoff,
    )


def parse_record_request(
    data: bytes,
    *,
    handoff_at: str | None = None,
    handoff_applies: str | None = None,
) -> RecordRequest:
    """Parse a strict ``RecordRequestV0`` document (§21).

    ``handoff_at``/``handoff_applies`` are the resolved ``--at``/``--applies`` of ``pal memory
    handoff``: they fill an omitted anchor or applicability and must match a given one.

    Raises:
        InvalidInput: unknown or duplicate fields, wrong types, a missing or unsupported
            ``version``, missing ``topics``/``evidence``, oversized input, trailing values.
    """
    doc = decode(data, max_bytes=MAX_INPUT_BYTES, trailing_whitespace=True)
    if not isinstance(doc, dict):
        raise _bad("record request must be a JSON object")
    extra = doc.keys() - _REQUEST_KEYS
    if extra:
        raise _bad(f"unknown record request field {sorted(extra)[0][:64]!r}")
    version = doc.get("version")
    if "version" not in doc or not isinstance(version, int) or isinstance(version, bool):
        raise _bad("record request version must be the integer 0")
    if version != 0:
        raise _bad(f"unsupported record request version {version}")
    handoff_mode = handoff_at is not None
    required = ["kind", "content", "topics", "evidence"]
    if not handoff_mode:
        required += ["anchor", "applicability"]
    for key in required:
        if key not in doc:
            raise _bad(f"record request lacks {key}")
    for key in ("kind", "content", "attemptOutcome", "actor", "stream"):
        if key in doc and not isinstance(doc[key], str):
            raise _bad(f"record request {key} must be a string")
    for key in ("topics", "evidence"):
        value = doc[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _bad(f"record request {key} must be a list of strings")
    if handoff_mode and doc["kind"] != "handoff":
        raise _bad("handoff input must have kind handoff")
    if "anchor" in doc:
        anchor = anchor_from_wire(doc["anchor"])
        if handoff_mode and anchor.commit != handoff_at:
            raise _bad("anchor.commit does not match --at")
    else:
        anchor = Anchor(commit=handoff_at or "")
    applicability = doc.get("applicability")
    if applicability is None and handoff_mode:
        mode = handoff_applies or ""
        subject = anchor.subject if mode == "subject" else ""
    else:
        if not isinstance(applicability, dict) or not applicability.keys() <= {"mode", "subject"}:
            raise _bad("record request applicability must be {mode, subject}")
        mode, subject = applicability.get("mode", ""), applicability.get("subject", "")
        if not isinstance(mode, str) or not isinstance(subject, str):
            raise _bad("applicability mode and subject must be strings")
        if handoff_mode and handoff_applies and mode != handoff_applies:
            raise _bad("applicability.mode does not match --applies")
    handoff = handoff_from_wire(doc["handoff"]) if doc.get("handoff") is not None else None
    record = Record(
        kind=doc["kind"],
        content=doc["content"],
        anchor=anchor,
        applicability=Applicability(mode, subject),
        topics=normalize_topics(doc["topics"]),
        evidence=tuple(doc["evidence"]),
        attempt_outcome=doc.get("attemptOutcome", ""),
        handoff=handoff,
    )
    return RecordRequest(record, doc.get("stream", ""), doc.get("actor", ""))


def check_anchor_commit(repo: pygit2.Repository, commit: str) -> None:
    """A JSON-supplied anchor commit must be a full ID naming a commit in this repository."""
    if not OBJECT_ID.fullmatch(commit) or store.RepoProbe(repo).commit_state(commit) != "commit":
        raise _bad("anchor.commit must be the full ID of a commit in this repository")


def append(
    repo: pygit2.Repository,
    identity: Identity,
    *,
    operation: str,
    stream: str = "",
    record: Record | None = None,
    target: str = "",
    reason: str = "",
    evidence: tuple[str, ...] = (),
    timestamp: str | None = None,
) -> VerifiedMemory:
    """Build, validate, sign and append one envelope to the identity's local stream.

    Raises:
        InvalidInput: the envelope breaks a protocol rule (nothing is written).
        Conflict: the stream moved concurrently; reload and retry with a new envelope.
    """
    stream = stream or default_stream(identity.actor)
    head = store.stream_head(repo, identity.actor, stream)
    envelope = Envelope(
        protocol=PROTOCOL,
        operation=operation,
        actor=identity.actor,
        actor_name=identity.name,
        public_key=identity.public_key_text,
        stream=stream,
        sequence=head.sequence,
        timestamp=timestamp or now_timestamp(),
        previous=head.previous,
        record=record,
        target=target,
        reason=reason,
        evidence=evidence,
    )
    payload = encode_envelope(envelope)  # validates every rule before anything is written
    store.ident_name(identity.name)
    signature = sign_text(identity.sign(payload))
    commit = store.append_memory(repo, payload, signature, envelope, head)
    return VerifiedMemory(memory_id(payload), commit, payload, envelope, signature, head.ref)


def check_lifecycle_target(
    memories: tuple[VerifiedMemory, ...], target_id: str, actor: str, operation: str
) -> VerifiedMemory:
    """CLI authorship rules (§3): supersede/retract only one's own record or supersede;
    challenge only another actor's."""
    if not FULL_ID.fullmatch(target_id):
        raise _bad(f"{operation} needs the full target memory ID (sha256:<64 hex>)")
    found = [m for m in memories if m.memory_id == target_id]
    if not found:
        raise InvalidInput(
            f"memory {target_id} was not found in verified local or accepted streams",
            code="memory-not-found",
        )
    target = found[0]
    if operation in ("supersede", "retract"):
        if target.envelope.operation not in ("record", "supersede"):
            raise _bad(f"{operation} target must be a record or supersede")
        if target.envelope.actor != actor:
            raise Forbidden(f"only the author of {target_id} may {operation} it", code="not-author")
    elif target.envelope.actor == actor:
        raise Forbidden(
            "you cannot challenge your own memory; retract it instead", code="own-memory"
        )
    return target


def check_actor(actor: str, identity: Identity) -> None:
    """A request's ``actor``, when it names one, must be the active identity."""
    if actor and actor != identity.actor:
        raise Forbidden("request actor is not the active identity", code="actor-mismatch")


def with_stream(request: RecordRequest, identity: Identity) -> str:
    """The stream a request names, checking its ``actor`` against the active identity."""
    check_actor(request.actor, identity)
    return request.stream


__all__ = [
    "MAX_INPUT_BYTES",
    "RecordRequest",
    "anchor_paths",
    "append",
    "build_record",
    "check_actor",
    "check_anchor_commit",
    "check_lifecycle_target",
    "normalize_topics",
    "now_timestamp",
    "parse_record_request",
    "with_stream",
]
