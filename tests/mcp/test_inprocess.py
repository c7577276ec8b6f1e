"""The server's tool-call paths with the official client connected in-process (no subprocess):
argument validation as tool errors, hostile tool names, erase never callable; arguments are
checked against the tool's input schema as HTTP checks a body (out of bounds refused, never
clamped; unknown arguments refused)."""

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


def _schema_cases(memory: str, record: str) -> list[tuple[str, dict[str, Any], str]]:
    """Calls HTTP would refuse, refused by the tool's schema in the project's words."""
    recall = {"memory": memory, "text": "Acme"}
    return [
        ("memory_recall", {**recall, "limit": -1},
         "memory_invalid: `limit` must be an integer from 1 to 50"),
        ("memory_recall", {**recall, "limit": 0},
         "memory_invalid: `limit` must be an integer from 1 to 50"),
        ("memory_recall", {**recall, "limit": 51},
         "memory_invalid: `limit` must be an integer from 1 to 50"),
        ("memory_recall", {**recall, "limit": 5.0},
         "memory_invalid: `limit` must be an integer from 1 to 50"),
        ("memory_recall", {**recall, "limit": True},
         "memory_invalid: `limit` must be an integer from 1 to 50"),
        ("memory_recall", {**recall, "depth": -1},
         "memory_invalid: `depth` must be an integer from 0 to 1000"),
        ("memory_recall", {**recall, "types": ["fact"] * 33},
         "memory_invalid: `types` must have at most 32 items"),
        ("memory_recall", {**recall, "types": ["fact", 3]},
         "memory_invalid: `types[1]` must be a string"),
        ("memory_recall", {**recall, "text": "a" * 4001},
         "memory_invalid: `text` must be at most 4000 characters"),
        ("memory_recall", {**recall, "lmit": 5},
         "memory_invalid: `lmit` is not an argument of memory_recall; send only memory, "
         "query, text, filters, types, depth, limit, include, provenance"),
        ("memory_recall", {**recall, "lim\u202eit": 5},
         "memory_invalid: `lim?it` is not an argument of memory_recall; send only memory, "
         "query, text, filters, types, depth, limit, include, provenance"),
        ("memory_graph", {"memory": memory, "hops": 4},
         "memory_invalid: `hops` must be an integer from 0 to 3"),
        ("memory_get", {"memory": memory, "record": record, "version": 1},
         "memory_invalid: `version` is not an argument of memory_get; send only memory, "
         "record, history, include"),
        ("memory_get", {"memory": memory, "record": record, "history": "yes"},
         "memory_invalid: `history` must be true or false"),
        ("memory_list", {"memory": 7}, "memory_invalid: `memory` must be a string"),
        ("memory_forget", {"memory": memory, "record": record, "reason": "x"},
         "memory_invalid: `reason` is not an argument of memory_forget; send only memory, "
         "record"),
        ("memory_log", {"project": memory, "ref": "main", "limit": 0},
         "memory_invalid: `limit` must be an integer from 1 to 200"),
    ]


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
                        "memory_invalid: `limit` must be an integer from 1 to 50",
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
                cases += [(name, args, expected) for name, args, expected in _schema_cases(
                    world.memory_id, world.records["plain"])]
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
