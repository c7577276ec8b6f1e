"""`pal mcp` over stdio with the official MCP client: offering rules, recall round trip, writes,
hostile content returned as fenced data with its writer, errors as tool errors."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp import Client, StdioServerParameters

from .world import (
    GIT_READ,
    GIT_WRITE,
    HOSTILE,
    PAL,
    READ_TOOLS,
    WRITE_TOOLS,
    World,
    build_world,
    child_env,
)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return build_world(tmp_path, {"reader": ["read"], "writer": ["read", "write"]})


def _params(world: World, agent: str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=PAL,
        args=[
            "mcp",
            "--data-dir",
            str(world.data_dir),
            "--credential-file",
            str(world.agents[agent].credential_file),
            *extra,
        ],
        env=child_env(),
        cwd=str(world.data_dir.parent),  # outside any Git repository: no repo-memory tools
    )


def _payload(result: types.CallToolResult) -> Any:
    assert result.is_error is False, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    text = block.text
    assert text.count("<untrusted-data>") == 1 and text.endswith("\n</untrusted-data>")
    return json.loads(text.split("<untrusted-data>\n", 1)[1].rsplit("\n</untrusted-data>", 1)[0])


def _error(result: types.CallToolResult) -> str:
    assert result.is_error is True
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def test_read_only_agent(world: World) -> None:
    with world.service() as svc:
        owner_id = svc.authenticate(world.owner_secret).member.id

    async def run() -> None:
        async with Client(_params(world, "reader")) as client:
            listed = await client.list_tools()
            names = [tool.name for tool in listed.tools]
            # the built-in provider offers named queries, no type operations, no free language
            assert names == [*READ_TOOLS, "memory_run_query", *GIT_READ]
            # outside a Git repository the repo-memory tools are neither listed nor callable
            outside = await client.call_tool("repo_memory_recall", {})
            assert _error(outside).startswith("Unknown tool")
            for tool in listed.tools:
                assert tool.annotations is not None
                assert tool.annotations.read_only_hint is True
            recall = await client.call_tool(
                "memory_recall", {"memory": world.memory_id, "text": "Acme contract"}
            )
            results = _payload(recall)["results"]
            ids = [r["record"]["id"] for r in results]
            assert world.records["plain"] in ids
            for item in results:
                assert item["record"]["trust"] == "untrusted"
                assert item["record"]["written_by"]["kind"] == "member"
            refused = await client.call_tool(
                "memory_remember", {"memory": world.memory_id, "content": "x"}
            )
            assert _error(refused).startswith("Unknown tool")
            # a hostile record comes back as data, with the writer the server stamped
            result = await client.call_tool(
                "memory_get", {"memory": world.memory_id, "record": world.records["hostile"]}
            )
            block = result.content[0]
            assert isinstance(block, types.TextContent)
            assert "</system>" not in block.text and "<system>" not in block.text
            record = _payload(result)
            assert record["content"] == [{"type": "text", "text": HOSTILE}]
            assert record["written_by"] == {"kind": "member", "id": owner_id, "type": "human"}
            assert record["trust"] == "untrusted"
            unknown = await client.call_tool("memory_recall", {"memory": "hmem_nope", "text": "a"})
            assert _error(unknown) == "There is no such memory within your reach."
            # arguments are checked as HTTP checks a body: -1 refused (not clamped), and an
            # argument the schema does not name refused (not ignored)
            recall = {"memory": world.memory_id, "text": "Acme contract"}
            negative = await client.call_tool("memory_recall", {**recall, "limit": -1})
            assert _error(negative) == "memory_invalid: `limit` must be an integer from 1 to 50"
            extra = await client.call_tool("memory_recall", {**recall, "top_k": 3})
            assert _error(extra).startswith(
                "memory_invalid: `top_k` is not an argument of memory_recall; send only memory,")
            schema = next(t for t in listed.tools if t.name == "memory_recall").input_schema
            assert schema["properties"]["limit"]["minimum"] == 1
            assert schema["additionalProperties"] is False

    anyio.run(run)


def test_write_agent_round_trip(world: World) -> None:
    async def run() -> None:
        async with Client(_params(world, "writer", "--memory", world.memory_id)) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names == [*READ_TOOLS, *WRITE_TOOLS, "memory_run_query", *GIT_READ, *GIT_WRITE]
            # no `memory`: the record goes to the default memory given to `pal mcp --memory`
            made = _payload(
                await client.call_tool(
                    "memory_remember",
                    {"type": "fact", "content": "Globex prefers quarterly invoices"},
                )
            )
            assert made["memory_id"] == world.memory_id
            assert made["written_by"] == {
                "kind": "member",
                "type": "agent",
                "id": world.agents["writer"].member_id,
            }
            revised = _payload(
                await client.call_tool(
                    "memory_revise",
                    {
                        "memory": world.memory_id,
                        "record": made["id"],
                        "content": "Globex prefers monthly invoices",
                        "reason": "customer call",
                    },
                )
            )
            assert revised["version"] == 2
            assert revised["attributes"]["revision_reason"] == "customer call"
            got = _payload(
                await client.call_tool(
                    "memory_get", {"memory": world.memory_id, "record": made["id"], "history": True}
                )
            )
            assert [v["version"] for v in got["data"]] == [1, 2]
            found = _payload(
                await client.call_tool(
                    "memory_recall", {"memory": world.memory_id, "text": "Globex invoices"}
                )
            )
            assert [r["record"]["id"] for r in found["results"]] == [made["id"]]
            gone = _payload(
                await client.call_tool(
                    "memory_forget", {"memory": world.memory_id, "record": made["id"]}
                )
            )
            assert gone["status"] == "forgotten"

    anyio.run(run)


def test_bad_credential_refuses_to_start(world: World, tmp_path: Path) -> None:
    bad = tmp_path / "bad.cred"
    bad.write_text("not-a-credential\n")
    os.chmod(bad, 0o600)

    done = subprocess.run(
        [PAL, "mcp", "--data-dir", str(world.data_dir), "--credential-file", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("pal: ") and done.stderr.count("\n") == 1
    os.chmod(bad, 0o644)
    loose = subprocess.run(
        [PAL, "mcp", "--data-dir", str(world.data_dir), "--credential-file", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert loose.returncode == 1 and "0600" in loose.stderr
