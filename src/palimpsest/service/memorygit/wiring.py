"""Opening Memory Git for a data directory: its store, its merge key ring, its access check.

Key ring sources, first match wins (memory-git.md §11 names the upstream variables):

1. ``PAL_MERGE_HMAC_KEYS`` or ``CHARON_MERGE_HMAC_KEYS`` = ``keyid=secret,…`` (rotation: every
   id verifies; the first, or ``PAL_MERGE_HMAC_ACTIVE``, signs);
2. ``PAL_MERGE_HMAC_KEY``, ``CHARON_MERGE_HMAC_KEY`` or the deprecated ``CHARON_HMAC_KEY``: one
   key with key id ``""``;
3. otherwise ``<data_dir>/merge-hmac.key`` (created with 32 random bytes, mode 0600), key id
   ``local``.

Every key must be at least 32 bytes.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.service.memorygit.mergeauth import KeyRing
from palimpsest.service.memorygit.repository import GitService, Projector, member_of
from palimpsest.service.model import Caller, Wire, forbidden, not_found
from palimpsest.service.mounts import read_only
from palimpsest.service.providers import REPOSITORY_PROVIDER
from palimpsest.service.storage.protocol import ReviewStore

KEY_FILE = "merge-hmac.key"


def load_key_ring(data_dir: Path, environ: Mapping[str, str] | None = None) -> KeyRing:
    """The merge key ring from the environment or the data directory (see module docs).

    Raises:
        InvalidInput: a malformed spec or a key shorter than 32 bytes.
    """
    env = os.environ if environ is None else environ
    spec = env.get("PAL_MERGE_HMAC_KEYS") or env.get("CHARON_MERGE_HMAC_KEYS")
    if spec:
        return KeyRing.from_spec(spec, env.get("PAL_MERGE_HMAC_ACTIVE") or None)
    for name in ("PAL_MERGE_HMAC_KEY", "CHARON_MERGE_HMAC_KEY", "CHARON_HMAC_KEY"):
        if env.get(name):
            return KeyRing({"": env[name].encode("utf-8")})
    path = data_dir / KEY_FILE
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32))
    return KeyRing({"local": path.read_text(encoding="ascii").strip().encode("ascii")})


class Host(Protocol):
    """What Memory Git needs of the memory service; the facade
    (:class:`palimpsest.service.memories.MemoryService`) is one, without this module ever
    importing it (the facade opens Memory Git, so the arrow points from it to here)."""

    @property
    def data_dir(self) -> Path:
        """Where the merge key file lives when no key is configured."""

    def memory_git_backend(self) -> tuple[ReviewStore, Projector]:
        """Memory Git's tables over the shared store, and the projector of accepted
        changesets."""

    def caller(self, member_id: str) -> Caller:
        """The caller a member id stands for."""

    def get_memory(self, caller: Caller, memory_id: str) -> Wire:
        """The memory as this caller sees it (raises memory_not_found otherwise)."""


@dataclass(frozen=True, slots=True)
class ServiceAccess:
    """Grant checks through the memory service's public facade (a project is a memory)."""

    svc: Host

    def require(self, principal: str, project: str, privilege: str) -> None:
        """Raise NotFound/Forbidden exactly as the UHP routes would."""
        member = member_of(principal)
        if not member:
            raise not_found()
        caller = self.svc.caller(member)
        memory = self.svc.get_memory(caller, project)
        if privilege not in memory.get("privileges", []):
            raise forbidden(privilege)  # exactly the UHP routes' refusal
        if privilege == "write" and memory.get("provider") == REPOSITORY_PROVIDER:
            raise read_only()  # a mounted repository's history is the repository's


def open_flow(svc: Host, ring: KeyRing | None = None) -> ReviewFlow:
    """Memory Git over the memory service's own database (a project is a memory).

    Changesets and refs are the service's; a merge into ``refs/shared/main`` projects the merged
    changesets into records and the search index in the same transaction.
    """
    store, projector = svc.memory_git_backend()
    git = GitService(store, ServiceAccess(svc), projector=projector)
    data_dir = Path(svc.data_dir)
    return ReviewFlow(git, ring or (lambda: load_key_ring(data_dir)))


__all__ = ["KEY_FILE", "Host", "ServiceAccess", "load_key_ring", "open_flow"]
