"""Fixtures: a real MemoryService in a temporary directory — over SQLite, or over PostgreSQL
too in a module that says ``BACKENDS = BOTH`` (tests/conftest.py) — and a fake clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from palimpsest.service import MemoryService
from palimpsest.service.model import Caller
from tests.conftest import Backend


class FakeClock:
    """Epoch milliseconds that move only when a test says so."""

    def __init__(self, start: int = 1_790_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def tick(self, ms: int = 1000) -> None:
        self.now += ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def svc(backend: Backend, clock: FakeClock) -> Iterator[MemoryService]:
    service = MemoryService(backend.data_dir, clock=clock, database=backend.database_url)
    yield service
    service.close()


@pytest.fixture
def owner(svc: MemoryService) -> Caller:
    made = svc.bootstrap_owner("owner")
    assert made is not None
    return svc.caller(made[0].id)


def member(svc: MemoryService, name: str, type: str = "agent") -> Caller:
    """A fresh member's caller."""
    return svc.caller(svc.create_member(name, type).id)
