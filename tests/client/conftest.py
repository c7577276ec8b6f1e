"""A real ``pal serve`` for the client tests (module scope), with an owner and two agents."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.server import Server, provision, start


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, Any]]]:
    data_dir = tmp_path_factory.mktemp("client") / "data"
    members = provision(data_dir, (("ada", "agent"), ("bo", "agent")))
    server = start(data_dir, env={"PAL_MERGE_HMAC_KEYS": "k=" + "k" * 40})
    try:
        yield server, members
    finally:
        server.stop()
