"""Memory refs (hn-memory-v0.md §8): the ref grammar and the names of local and accepted
stream refs.  Pure: the refs are listed by :mod:`.repository` (libgit2) or :mod:`.headfiles`
(the ref files themselves)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from palimpsest.errors import InvalidInput

LOCAL_PREFIX = "refs/hn/memory/"
REMOTES_PREFIX = "refs/hn/remotes/"

_HEX64 = re.compile(r"[0-9a-f]{64}")
_REMOTE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


@dataclass(frozen=True, slots=True)
class MemoryRef:
    """One memory stream ref: local (``remote`` is None) or accepted from a remote."""

    name: str
    actor: str
    stream: str  # full "sha256:<hex>" form
    head: str
    remote: str | None = None


def malformed_ref(name: str) -> InvalidInput:
    """``malformed-memory-ref`` naming the ref."""
    return InvalidInput(f"malformed memory ref {name!r}", code="malformed-memory-ref")


def valid_remote_name(remote: str) -> bool:
    """Remote names (§8): ``[A-Za-z0-9_][A-Za-z0-9_.-]*``, ≤ 128 bytes, no ``..``, no trailing
    ``.``, no ``.lock`` suffix."""
    return (
        len(remote) <= 128
        and _REMOTE.fullmatch(remote) is not None
        and ".." not in remote
        and not remote.endswith(".")
        and not remote.endswith(".lock")
    )


def local_ref_name(actor: str, stream: str) -> str:
    """``refs/hn/memory/<actor>/<stream hex>`` for a full ``sha256:`` stream ID."""
    return f"{LOCAL_PREFIX}{actor}/{stream.removeprefix('sha256:')}"


def remote_ref_name(remote: str, actor: str, stream: str) -> str:
    """``refs/hn/remotes/<remote>/memory/<actor>/<stream hex>``."""
    return f"{REMOTES_PREFIX}{remote}/memory/{actor}/{stream.removeprefix('sha256:')}"


def parse_memory_ref(name: str, head: str = "") -> MemoryRef | None:
    """Parse a ref name by the §8 grammar.

    Returns ``None`` for refs outside the memory namespaces (e.g. ``refs/hn/remotes/r/actors/…``).

    Raises:
        InvalidInput: ``malformed-memory-ref`` for a ref inside a memory namespace that breaks
            the grammar (wrong component count, upper-case hex, hostile remote name).
    """
    if name.startswith(LOCAL_PREFIX):
        parts = name[len(LOCAL_PREFIX) :].split("/")
        if len(parts) != 2 or not all(_HEX64.fullmatch(p) for p in parts):
            raise malformed_ref(name)
        return MemoryRef(name, parts[0], "sha256:" + parts[1], head)
    if name.startswith(REMOTES_PREFIX):
        parts = name[len(REMOTES_PREFIX) :].split("/")
        if len(parts) < 2 or parts[1] != "memory":
            return None
        if len(parts) != 4 or not valid_remote_name(parts[0]):
            raise malformed_ref(name)
        if not (_HEX64.fullmatch(parts[2]) and _HEX64.fullmatch(parts[3])):
            raise malformed_ref(name)
        return MemoryRef(name, parts[2], "sha256:" + parts[3], head, parts[0])
    return None


__all__ = [
    "LOCAL_PREFIX",
    "REMOTES_PREFIX",
    "MemoryRef",
    "local_ref_name",
    "malformed_ref",
    "parse_memory_ref",
    "remote_ref_name",
    "valid_remote_name",
]
