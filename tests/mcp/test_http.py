"""The MCP endpoint of the live `pal serve` (streamable HTTP at /mcp) with the official client:
per-agent offering rules, a recall round trip, a Memory Git propose/review/merge round trip
between two agents, hostile content as data, and the Host/Origin and credential checks."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pygit2
import pytest
from mcp.client.streamable_http import streamable_http_client

from mcp import Client

from .live import pal_serve
from .world import GIT_READ, GIT_WRITE, HOSTILE, READ_TOOLS, WRITE_TOOLS, World, build_world


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, str]]:
    root = tmp_path_factory.mktemp("mcp-http")
    world = build_world(
        root, {"reader": ["read"], "alice": ["read", "write"], "bob": ["read", "write"]}
    )
    # started inside a Git repository: the HTTP endpoint must still never offer repo tools
    pygit2.init_repository(str(root / "repo"), initial_head="main")
    with pal_serve(world.data_dir, cwd=root / "repo") as url:
        yield world, url


def _client(url: str, secret: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


def _payload(result: types.CallToolResult) -> Any:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    assert result.is_error is False, block.text
    text = block.text
    assert text.count("<untrusted-data>") == 1
    return json.loads(text.split("<untrusted-data>\n", 1)[1].rsplit("\n</untrusted-data>", 1)[0])


def _names(result: types.ListToolsResult) -> list[str]:
    return [tool.name for tool in result.tools]


def test_tool_lists_follow_each_agents_grants(served: tuple[World, str]) -> None:
    world, url = served

    async def run() -> None:
        async with _client(url, world.agents["reader"].secret) as reader:
            assert _names(await reader.list_tools()) == [*READ_TOOLS, "memory_run_query", *GIT_READ]
            # the server runs inside a Git repository; repo tools are stdio-only
            refused = await reader.call_tool("repo_memory_recall", {})
            assert refused.is_error is True
        async with _client(url, world.agents["alice"].secret) as writer:
            assert _names(await writer.list_tools()) == [
                *READ_TOOLS,
                *WRITE_TOOLS,
                "memory_run_query",
                *GIT_READ,
                *GIT_WRITE,
            ]

    anyio.run(run)


def test_recall_round_trip_and_hostile_content(served: tuple[World, str]) -> None:
    world, url = served

    async def run() -> None:
        async with _client(url, world.agents["reader"].secret) as client:
            found = _payload(
                await client.call_tool(
                    "memory_recall", {"memory": world.memory_id, "text": "Acme", "limit": 50}
                )
            )
            by_id = {r["record"]["id"]: r for r in found["results"]}
            assert set(by_id) == {world.records["plain"], world.records["hostile"]}
            hostile = by_id[world.records["hostile"]]["record"]
            assert hostile["content"] == [{"type": "text", "text": HOSTILE}]
            assert hostile["written_by"]["kind"] == "member"
            assert hostile["trust"] == "untrusted"
            assert by_id[world.records["hostile"]]["memory"] == {
                "id": world.memory_id,
                "name": "Team",
            }

    anyio.run(run)


def test_memory_git_round_trip_between_two_agents(served: tuple[World, str]) -> None:
    world, url = served
    alice, bob = world.agents["alice"], world.agents["bob"]
    root = httpx.post(
        f"{url}/api/memory/{world.memory_id}/legacy-root",
        headers={"Authorization": f"Bearer {world.owner_secret}"},
        json={},
    )
    assert root.status_code in (200, 201), root.text
    base = root.json()["ref"]["head_changeset_id"]
    mine = f"refs/agents/{alice.member_id}/main"

    async def run() -> None:
        async with _client(url, alice.secret) as a, _client(url, bob.secret) as b:
            _payload(
                await a.call_tool(
                    "memory_branch_create",
                    {"project": world.memory_id, "ref_name": mine, "head_changeset_id": base},
                )
            )
            change = _payload(
                await a.call_tool(
                    "memory_changeset_create",
                    {
                        "project": world.memory_id,
                        "ref": mine,
                        "expected_head": base,
                        "parent_ids": [base],
                        "message": "what we learned",
                        "idempotency_key": "k1",
                        "ops": [
                            {
                                "op_type": "add_memory",
                                "payload": {"content": "Initech pays on net-30", "kind": "fact"},
                            }
                        ],
                    },
                )
            )
            proposal = _payload(
                await a.call_tool(
                    "memory_merge_propose",
                    {
                        "project": world.memory_id,
                        "target_ref": "refs/shared/main",
                        "head_changeset_id": change["changeset_id"],
                        "message": "please merge",
                        "idempotency_key": "p1",
                    },
                )
            )
            pid = proposal["proposal_id"]
            self_review = await a.call_tool(
                "memory_merge_review", {"proposal_id": pid, "verdict": "approve"}
            )
            assert self_review.is_error is True
            before = _payload(
                await b.call_tool(
                    "memory_context_at",
                    {"project": world.memory_id, "ref": "refs/shared/main", "query": "Initech"},
                )
            )
            assert before["memories"] == []
            review = _payload(
                await b.call_tool(
                    "memory_merge_review",
                    {"proposal_id": pid, "verdict": "approve", "comment": "checked"},
                )
            )
            assert review["verdict"] == "approve"
            merged = _payload(await b.call_tool("memory_merge", {"proposal_id": pid}))
            assert merged["strategy"] == "fast_forward"
            after = _payload(
                await a.call_tool(
                    "memory_context_at",
                    {"project": world.memory_id, "ref": "refs/shared/main", "query": "Initech"},
                )
            )
            assert [m["content"] for m in after["memories"]] == ["Initech pays on net-30"]
            status = _payload(await a.call_tool("memory_status", {"project": world.memory_id}))
            assert status["open_proposals"] == []
            # over HTTP there is no default memory unless the harness settings name one
            nowhere = await a.call_tool("memory_remember", {"content": "lost?"})
            assert nowhere.is_error is True
            block = nowhere.content[0]
            assert isinstance(block, types.TextContent)
            assert "no default memory" in block.text
            # once the harness settings name a default memory, it is used
            put = httpx.put(
                f"{url}/v1/harnesses/{alice.member_id}/memories",
                headers={"Authorization": f"Bearer {alice.secret}"},
                json={"default_memory_id": world.memory_id},
            )
            assert put.status_code == 200, put.text
            kept = _payload(await a.call_tool("memory_remember", {"content": "found a home"}))
            assert kept["memory_id"] == world.memory_id

    anyio.run(run)


def test_http_guard_applies_to_mcp(served: tuple[World, str]) -> None:
    world, url = served
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    no_token = httpx.post(f"{url}/mcp", json=body, headers=headers)
    assert no_token.status_code == 401
    auth = {**headers, "Authorization": f"Bearer {world.agents['reader'].secret}"}
    evil_host = httpx.post(f"{url}/mcp", json=body, headers={**auth, "Host": "evil.example"})
    assert evil_host.status_code in (403, 421)
    evil_origin = httpx.post(
        f"{url}/mcp", json=body, headers={**auth, "Origin": "https://evil.example"}
    )
    assert evil_origin.status_code in (403, 421)
    assert "Initech" not in evil_origin.text and "Acme" not in evil_origin.text


def test_tool_writes_and_refusals_are_audited_without_content(served: tuple[World, str]) -> None:
    world, url = served
    secret_text = "ocelot-4471 audited only by name"

    async def run() -> None:
        async with _client(url, world.agents["alice"].secret) as writer:
            done = await writer.call_tool("memory_remember",
                                          {"memory": world.memory_id, "content": secret_text})
            assert done.is_error is False
        async with _client(url, world.agents["reader"].secret) as reader:
            refused = await reader.call_tool("memory_remember",
                                             {"memory": world.memory_id, "content": secret_text})
            assert refused.is_error is True
            answered = await reader.call_tool("memory_recall",
                                              {"memory": world.memory_id, "text": "ocelot"})
            assert answered.is_error is False  # a read that was answered: not audited

    began = int(time.time() * 1000) - 1
    anyio.run(run)
    with world.service() as svc:  # this test's calls (other tests of the module write too)
        rows = [e for e in svc.audit_log(since=began, limit=1000) if e.surface == "mcp"]
    alice, reader = world.agents["alice"].member_id, world.agents["reader"].member_id
    assert [(e.action, e.outcome, e.member_id, e.memory_id) for e in rows
            if e.member_id == alice] == [("tool memory_remember", "ok", alice, world.memory_id)]
    mine = [e for e in rows if e.member_id == reader]
    assert [(e.action, e.outcome) for e in mine] == [("tool memory_remember", "refused")]
    assert mine[0].reason and mine[0].credential_id and mine[0].request_id
    assert not any("ocelot" in str(v) for e in rows for v in e.to_wire().values())
