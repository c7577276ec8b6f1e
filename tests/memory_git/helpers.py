"""Test wiring for Memory Git: a grant table, a settable clock, and the service's real SQLite
store (records are not projected here: tests/memory_git/test_http_flow.py covers that)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palimpsest.errors import Forbidden, NotFound
from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.service.memorygit.mergeauth import KeyRing
from palimpsest.service.memorygit.repository import GitService
from palimpsest.service.storage import open_store
from palimpsest.service.storage.memorygit import GitStore

KEY = b"k" * 32
START_NS = 1_790_000_000 * 1_000_000_000


@dataclass
class GrantTable:
    """principal -> project -> privileges; unknown projects look absent."""

    grants: dict[str, dict[str, set[str]]] = field(default_factory=dict)

    def allow(self, principal: str, project: str, *privs: str) -> None:
        self.grants.setdefault(principal, {})[project] = set(privs)

    def require(self, principal: str, project: str, privilege: str) -> None:
        held = self.grants.get(principal, {}).get(project)
        if held is None:
            raise NotFound("no such memory within your reach", code="memory_not_found")
        if privilege not in held:
            raise Forbidden(f"this needs the {privilege} privilege", code="memory_forbidden")


@dataclass
class Clock:
    now: int = START_NS

    def __call__(self) -> int:
        self.now += 1_000_000  # 1 ms per read keeps ids ordered
        return self.now


def make_flow(tmp: Path, ring: KeyRing | None = None, *, database: str | None = None
              ) -> tuple[ReviewFlow, GrantTable, Clock]:
    """A review flow over a fresh store in ``tmp`` (on PostgreSQL with ``database``)."""
    access = GrantTable()
    clock = Clock()
    git = GitService(GitStore(open_store(tmp / "data", database=database)), access, clock)
    return ReviewFlow(git, ring or KeyRing({"k1": KEY})), access, clock


def add(content: str, **payload: Any) -> dict[str, Any]:
    return {"op_type": "add_memory", "payload": {"content": content, **payload}}


def commit_body(project: str, ref: str, expected: str | None, key: str,
                *ops: dict[str, Any], **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"project_id": project, "ref_name": ref, "idempotency_key": key,
                            "message": key, "ops": list(ops), **extra}
    if expected is not None:
        body["expected_head"] = expected
    return body
