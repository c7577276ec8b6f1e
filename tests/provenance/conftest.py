"""Fixtures for provenance: a real service over SQLite, its owner, an agent with a grant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from palimpsest.service import MemoryService
from palimpsest.service.model import Caller


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[MemoryService]:
    service = MemoryService(tmp_path / "data")
    yield service
    service.close()


@pytest.fixture
def owner(svc: MemoryService) -> Caller:
    made = svc.bootstrap_owner("owner")
    assert made is not None
    return svc.caller(made[0].id)


@pytest.fixture
def mid(svc: MemoryService, owner: Caller) -> str:
    made: str = svc.create_memory(owner, {"name": "team", "description": "what we know"})["id"]
    return made


def agent(svc: MemoryService, owner: Caller, mid: str, name: str = "agent-1") -> Caller:
    """A fresh agent member with read and write on ``mid``."""
    caller = svc.caller(svc.create_member(name, "agent").id)
    svc.put_grant(owner, mid, {"principal": f"member:{caller.member.id}",
                               "privileges": ["read", "write"]})
    return caller
