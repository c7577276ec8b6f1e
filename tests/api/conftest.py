"""Fixtures: a real ``pal serve`` on a free loopback port per test module, with members."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.server import Server, provision, start
from tests.conftest import Backend

# alice: a person; bob and carol: agents; bob is in group "team".
MEMBERS = (("alice", "human"), ("bob", "agent"), ("carol", "agent"))
GROUPS = {"team": ["bob"]}


@pytest.fixture(scope="module")
def world(module_backend: Backend) -> Iterator[tuple[Server, dict[str, Any]]]:
    """A started server and its provisioned members (``owner``, ``alice``, ``bob``, ``carol``),
    on each store the module lists in ``BACKENDS``."""
    data_dir = module_backend.data_dir
    members = provision(data_dir, MEMBERS, GROUPS, database=module_backend.database_url)
    server = start(data_dir, *module_backend.serve_args())
    try:
        yield server, members
    finally:
        server.stop()


@pytest.fixture(scope="module")
def server(world: tuple[Server, dict[str, Any]]) -> Server:
    """The started server."""
    return world[0]


@pytest.fixture(scope="module")
def members(world: tuple[Server, dict[str, Any]]) -> dict[str, Any]:
    """Provisioned members by name."""
    return world[1]
