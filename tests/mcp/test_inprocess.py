"""The server's tool-call paths with the official client connected in-process (no subprocess):
argument validation as tool errors, hostile tool names, erase never callable."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp import Client
from palimpsest.mcp.server import Binding, build_server
from palimpsest.service.memorygit.wiring import open_flow

from .world import World, build_world


@pytest.fixture
def world(tmp_path: Path) -> World:
    return build_world(tmp_path, {"writer": ["read", "write", "create", "delete"]})


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def test_call_paths(world: World) -> None:
    with world.service() as svc:
        caller = svc.authenticate(world.agents["writer"].secret)

        async def invoke(fn: Callable[[], Any]) -> Any:
            return fn()

        server = build_server(Binding(svc, lambda _ctx: caller, invoke, None, open_flow(svc)))

        async def run() -> None:
            async with Client(server) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                assert "memory_erase" not in names and not [n for n in names if "erase" in n]
                cases: list[tuple[str, dict[str, Any], str]] = [
                    (
                        "memory_erase",
                        {"memory": world.memory_id, "record_ids": [world.records["plain"]]},
                        "Unknown tool: memory_erase",
                    ),
                    ("memory list", {}, "Unknown tool: memory list"),
                    ("memory_list\u202e", {}, "Unknown tool: memory_list?"),
                    (
                        "memory_recall",
                        {"memory": world.memory_id, "limit": "5", "text": "a"},
                        "memory_invalid: `limit` must be an integer",
                    ),
                    (
                        "memory_recall",
                        {"memory": world.memory_id, "types": "fact", "text": "a"},
                        "memory_invalid: `types` must be a list of strings",
                    ),
                    (
                        "memory_get",
                        {"memory": world.memory_id},
                        "memory_invalid: `record` is required",
                    ),
                    (
                        "memory_remember",
                        {"memory": world.memory_id, "type": "x.secret", "content": "c"},
                        "memory_invalid: `type` must be one of fact, note, procedure, link, entity",
                    ),
                    (
                        "memory_revise",
                        {
                            "memory": world.memory_id,
                            "record": world.records["plain"],
                            "reason": "r" * 501,
                        },
                        "memory_invalid: `reason` must be at most 500 characters",
                    ),
                    (
                        "memory_get",
                        {"memory": world.memory_id, "record": "hrec_nope"},
                        "There is no such record in that memory.",
                    ),
                    (
                        "memory_list",
                        {"memory": "hmem_nope"},
                        "There is no such memory within your reach.",
                    ),
                ]
                for name, args, expected in cases:
                    result = await client.call_tool(name, args)
                    assert result.is_error is True, name
                    assert _text(result) == expected, name
                # the records are untouched by every refused call
                got = await client.call_tool(
                    "memory_get", {"memory": world.memory_id, "record": world.records["plain"]}
                )
                assert got.is_error is False
                assert '"version":1' in _text(got)

        anyio.run(run)
