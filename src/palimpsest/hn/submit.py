"""One strict version-0 request document → one signed append: the path shared by the CLI's
``--input`` and the MCP write tools (``repo_memory_record`` …), so both refuse and write alike.

The five operations and their documents:

- ``record``: a ``RecordRequestV0`` (hn-memory-v0.md §21);
- ``handoff``: a ``RecordRequestV0`` of kind ``handoff``; ``at``/``applies`` (``--at``,
  ``--applies``) fill an omitted anchor commit or mode and must match a given one;
- ``supersede``: a ``RecordRequestV0`` for the replacement, and the ``target`` (the full ID of
  one of the actor's records or supersedes);
- ``retract``: a ``LifecycleRequestV0`` ``{version, reason, stream?, actor?}`` and the
  ``target`` (the actor's own record or supersede);
- ``challenge``: a ``LifecycleRequestV0`` ``{version, reason, evidence?, stream?, actor?}``
  and the ``target`` (another actor's memory).

The lifecycle document is a Palimpsest extension (upstream ``hn`` takes those three from flags
only); its rules are the record request's: an integer ``version`` 0, no unknown or duplicate
field, valid UTF-8, at most 1 MiB, nothing after the value. ``actor``, when given, must be the
active identity. Everything is checked before anything is appended; the append itself is
:func:`palimpsest.hn.author.append` (compare-and-swap on the stream head: a lost race is
``cas-failed``, "reload and retry").

The capture boundary (requirements 001): the document, the target and ``at``/``applies`` are
all that is read. The identity is the repository's active one, read from ``.git/hn``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from palimpsest.canonical import decode
from palimpsest.errors import InvalidInput
from palimpsest.hn import store
from palimpsest.hn.author import (
    MAX_INPUT_BYTES,
    append,
    check_actor,
    check_anchor_commit,
    check_lifecycle_target,
    parse_record_request,
    with_stream,
)
from palimpsest.identity import load_identity
from palimpsest.text import to_lower, trim_space

if TYPE_CHECKING:
    import pygit2

    from palimpsest.hn.envelope import VerifiedMemory

OPERATIONS = ("record", "handoff", "supersede", "retract", "challenge")
TARGETED = frozenset({"supersede", "retract", "challenge"})
_LIFECYCLE_KEYS = {
    "retract": frozenset({"version", "reason", "stream", "actor"}),
    "challenge": frozenset({"version", "reason", "evidence", "stream", "actor"}),
}


def _bad(message: str) -> InvalidInput:
    return InvalidInput(message, code="invalid-request")


@dataclass(frozen=True, slots=True)
class LifecycleRequest:
    """What a retract or challenge document asks for."""

    reason: str
    evidence: tuple[str, ...] = ()
    stream: str = ""
    actor: str = ""


def parse_lifecycle_request(data: bytes, operation: str) -> LifecycleRequest:
    """Parse a strict ``LifecycleRequestV0`` for ``retract`` or ``challenge``.

    Raises:
        InvalidInput: unknown or duplicate fields (``evidence`` is unknown to a retract), wrong
            types, a missing ``reason``, a missing or unsupported ``version``, oversized input,
            invalid UTF-8, trailing values.
    """
    doc = decode(data, max_bytes=MAX_INPUT_BYTES, trailing_whitespace=True)
    if not isinstance(doc, dict):
        raise _bad(f"{operation} request must be a JSON object")
    extra = doc.keys() - _LIFECYCLE_KEYS[operation]
    if extra:
        raise _bad(f"unknown {operation} request field {sorted(extra)[0][:64]!r}")
    version = doc.get("version")
    if "version" not in doc or not isinstance(version, int) or isinstance(version, bool):
        raise _bad(f"{operation} request version must be the integer 0")
    if version != 0:
        raise _bad(f"unsupported {operation} request version {version}")
    for key in ("reason", "stream", "actor"):
        if key in doc and not isinstance(doc[key], str):
            raise _bad(f"{operation} request {key} must be a string")
    if "reason" not in doc:
        raise _bad(f"{operation} request lacks reason")
    evidence = doc.get("evidence", [])
    if not isinstance(evidence, list) or not all(isinstance(v, str) for v in evidence):
        raise _bad(f"{operation} request evidence must be a list of strings")
    return LifecycleRequest(to_lower(trim_space(doc["reason"])), tuple(evidence),
                            doc.get("stream", ""), doc.get("actor", ""))


def submit(
    repo: pygit2.Repository,
    operation: str,
    document: bytes,
    *,
    target: str = "",
    at: str = "",
    applies: str = "",
) -> VerifiedMemory:
    """Check one request document completely, then sign it with the active identity and append.

    ``target`` is required by (and only allowed for) supersede, retract and challenge; ``at``
    (any revision) and ``applies`` only for handoff.

    Raises:
        InvalidInput: a refused document or argument (nothing is written).
        Forbidden: ``actor-mismatch``, ``not-author``, ``own-memory``.
        NotFound: no active identity, or the target is not a verified memory.
        Conflict: ``cas-failed``: the stream moved; reload and retry.
    """
    if operation not in OPERATIONS:
        raise _bad(f"unknown operation {operation[:32]!r}; use " + ", ".join(OPERATIONS))
    if (operation in TARGETED) != bool(target):
        raise _bad(f"{operation} needs a target memory ID" if operation in TARGETED
                   else f"{operation} takes no target")
    if operation != "handoff" and (at or applies):
        raise _bad(f"at and applies belong to handoff, not {operation}")
    git_dir = store.git_dir(repo)
    if operation in ("retract", "challenge"):
        lifecycle = parse_lifecycle_request(document, operation)
        identity = load_identity(git_dir)
        check_actor(lifecycle.actor, identity)
        check_lifecycle_target(store.collect(repo), target, identity.actor, operation)
        return append(repo, identity, operation=operation, stream=lifecycle.stream,
                      target=target, reason=lifecycle.reason, evidence=lifecycle.evidence)
    if operation == "handoff":
        resolved = store.resolve_commit(repo, at) if at else ""
        request = parse_record_request(document, handoff_at=resolved, handoff_applies=applies)
    else:
        request = parse_record_request(document)
    identity = load_identity(git_dir)
    stream = with_stream(request, identity)
    check_anchor_commit(repo, request.record.anchor.commit)
    if operation == "supersede":
        check_lifecycle_target(store.collect(repo), target, identity.actor, "supersede")
        return append(repo, identity, operation="supersede", stream=stream,
                      record=request.record, target=target)
    return append(repo, identity, operation="record", stream=stream, record=request.record)


__all__ = ["OPERATIONS", "TARGETED", "LifecycleRequest", "parse_lifecycle_request", "submit"]
