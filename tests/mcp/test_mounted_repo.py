"""A Git repository mounted into the live `pal serve` (`pal admin mount-repo`, run while the
server runs) answers recall over HTTP and over MCP (the official client) with exactly the
memories `pal memory recall --json` returns in that repository, fresh after an append without a
restart, in one question with the service's own records; a caller without a grant sees nothing
of it, and its refusal is the one an unknown memory gets."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pygit2
import pytest
from mcp.client.streamable_http import streamable_http_client

from mcp import Client
from tests.hn.helpers import ALICE, BOB
from tests.hn.recall_helpers import new_repo, pal, remember

from .live import pal_serve
from .world import PAL, World, build_world


@dataclass
class Mounted:
    world: World
    url: str
    repo: Path
    memory_id: str
    outsider: str  # a credential secret with no grant anywhere


@pytest.fixture(scope="module")
def mounted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mounted]:
    root = tmp_path_factory.mktemp("mounted-repo")
    world = build_world(root, {"reader": ["read"]})
    repo = new_repo(root / "repo", [ALICE])
    remember(repo, ALICE, "Acme deploys from the release branch", kind="decision")
    remember(repo, ALICE, "Acme builds are verified on every push")
    remember(repo, BOB, "Acme is not trusted by the policy")
    with world.service() as svc:
        owner = svc.authenticate(world.owner_secret)
        mid = svc.create_memory(owner, {"name": "Repo", "parent_id": world.memory_id})["id"]
        outsider = svc.create_member("outsider", "agent")
        _, outsider_secret = svc.issue_credential(outsider.id)
    with pal_serve(world.data_dir) as url:
        # mounted while the server runs: the next read sees it, no restart
        done = subprocess.run(
            [PAL, "admin", "--data-dir", str(world.data_dir), "mount-repo", str(root / "repo"),
             "--memory", mid, "--json"], capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"object": "memory.mount", "memory_id": mid,
                                           "provider": "hn-memory",
                                           "path": str((root / "repo").resolve())}
        yield Mounted(world, url, root / "repo", mid, outsider_secret)


def _pal_recall(repo: Path, query: str) -> list[dict[str, Any]]:
    done = pal(repo, "recall", "--query", query, "--json")
    assert done.returncode == 0, done.stderr
    memories: list[dict[str, Any]] = json.loads(done.stdout)["memories"]
    assert memories
    return memories


def _http_recall(m: Mounted, secret: str, memory_id: str, body: dict[str, Any]
                 ) -> httpx.Response:
    return httpx.post(f"{m.url}/v1/memories/{memory_id}/recall", json=body,
                      headers={"Authorization": f"Bearer {secret}"}, timeout=60)


def _same(results: list[dict[str, Any]], memories: list[dict[str, Any]]) -> None:
    """The service's records are the repository's memories, one for one and in order."""
    assert [r["record"]["id"] for r in results] == [m["id"] for m in memories]
    for result, memory in zip(results, memories, strict=True):
        record = result["record"]
        assert record["content"] == [{"type": "text", "text": memory["data"]["content"]}]
        assert {k: record["attributes"][k] for k in ("kind", "lifecycle", "trust", "actor",
                                                     "signature")} == {
            k: memory[k] for k in ("kind", "lifecycle", "trust", "actor", "signature")}
        assert record["written_by"]["on_behalf_of"]["id"] == f"hn-actor:{memory['actor']}"


def _client(url: str, secret: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def _payload(result: types.CallToolResult) -> Any:
    assert result.is_error is False, _text(result)
    text = _text(result)
    return json.loads(text.split("<untrusted-data>\n", 1)[1].rsplit("\n</untrusted-data>", 1)[0])


def test_http_recall_is_the_repositorys_recall(mounted: Mounted) -> None:
    reader = mounted.world.agents["reader"].secret
    answer = _http_recall(mounted, reader, mounted.memory_id, {"text": "acme", "limit": 20})
    assert answer.status_code == 200, answer.text
    _same(answer.json()["results"], _pal_recall(mounted.repo, "acme"))
    # one question at the parent: the service's own records and the repository's together
    both = _http_recall(mounted, reader, mounted.world.memory_id, {"text": "acme", "limit": 50})
    assert both.status_code == 200, both.text
    by_memory: dict[str, list[dict[str, Any]]] = {}
    for result in both.json()["results"]:
        by_memory.setdefault(result["memory"]["name"], []).append(result)
    assert sorted(by_memory) == ["Repo", "Team"]
    _same(by_memory["Repo"], _pal_recall(mounted.repo, "acme"))
    assert {r["record"]["id"] for r in by_memory["Team"]} == set(
        mounted.world.records.values())


def test_mcp_recall_is_the_repositorys_recall(mounted: Mounted) -> None:
    async def run() -> None:
        async with _client(mounted.url, mounted.world.agents["reader"].secret) as client:
            found = _payload(await client.call_tool(
                "memory_recall", {"memory": mounted.memory_id, "text": "acme", "limit": 20}))
            _same(found["results"], _pal_recall(mounted.repo, "acme"))

    anyio.run(run)


def test_an_append_shows_up_on_the_next_read(mounted: Mounted) -> None:
    added = remember(pygit2.Repository(str(mounted.repo)), ALICE, "Acme rotates keys monthly")
    reader = mounted.world.agents["reader"].secret
    expected = _pal_recall(mounted.repo, "acme")
    assert added.memory_id in [m["id"] for m in expected]
    answer = _http_recall(mounted, reader, mounted.memory_id, {"text": "acme", "limit": 20})
    _same(answer.json()["results"], expected)


def test_a_caller_without_a_grant_sees_nothing_of_it(mounted: Mounted) -> None:
    outsider = mounted.outsider
    unseen = _http_recall(mounted, outsider, mounted.memory_id, {"text": "acme"})
    unknown = _http_recall(mounted, outsider, "hmem_nosuchmemoryanywhere", {"text": "acme"})
    assert unseen.status_code == unknown.status_code == 404
    assert unseen.json()["error"]["code"] == "memory_not_found"
    assert unseen.json()["error"] == unknown.json()["error"]
    listed = httpx.get(f"{mounted.url}/v1/memories",
                       headers={"Authorization": f"Bearer {outsider}"}, timeout=60)
    assert listed.status_code == 200 and listed.json()["data"] == []

    async def run() -> None:
        async with _client(mounted.url, outsider) as client:
            refused = await client.call_tool(
                "memory_recall", {"memory": mounted.memory_id, "text": "acme"})
            other = await client.call_tool(
                "memory_recall", {"memory": "hmem_nosuchmemoryanywhere", "text": "acme"})
            assert refused.is_error is True and other.is_error is True
            assert _text(refused) == _text(other)
            assert "Acme" not in _text(refused)

    anyio.run(run)


def test_writes_over_http_are_unsupported(mounted: Mounted) -> None:
    owner = mounted.world.owner_secret
    answer = httpx.post(f"{mounted.url}/v1/memories/{mounted.memory_id}/records",
                        json={"content": "written through the service"},
                        headers={"Authorization": f"Bearer {owner}"}, timeout=60)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "memory_unsupported"
    providers = httpx.get(f"{mounted.url}/v1/memories/providers",
                          headers={"Authorization": f"Bearer {owner}"}, timeout=60).json()
    doc = {d["id"]: d for d in providers["data"]}["hn-memory"]
    assert doc["recall"]["signals"] == ["text", "filters"] and doc["revise"] is False


def test_get_and_list_over_http_and_mcp(mounted: Mounted) -> None:
    reader = mounted.world.agents["reader"].secret
    first = _pal_recall(mounted.repo, "acme")[0]
    auth = {"Authorization": f"Bearer {reader}"}
    got = httpx.get(f"{mounted.url}/v1/memories/{mounted.memory_id}/records/{first['id']}",
                    headers=auth, timeout=60)
    assert got.status_code == 200, got.text
    assert got.json()["content"] == [{"type": "text", "text": first["data"]["content"]}]
    listed = httpx.get(f"{mounted.url}/v1/memories/{mounted.memory_id}/records",
                       params={"limit": 50}, headers=auth, timeout=60)
    assert listed.status_code == 200, listed.text
    done = pal(mounted.repo, "recall", "--json")
    assert [r["id"] for r in listed.json()["data"]] == [
        m["id"] for m in json.loads(done.stdout)["memories"]]

    async def run() -> None:
        async with _client(mounted.url, reader) as client:
            record = _payload(await client.call_tool(
                "memory_get", {"memory": mounted.memory_id, "record": first["id"]}))
            assert record["id"] == first["id"]
            assert record["written_by"]["kind"] == "provider"

    anyio.run(run)
