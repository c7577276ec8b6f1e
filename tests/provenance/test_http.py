"""Provenance over a real ``pal serve``: published keys, members' keys, signatures of a
changeset read and added over HTTP, and the admin key commands."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.streamable_http import streamable_http_client

from mcp import Client
from palimpsest.identity import b64_nopad, new_identity
from palimpsest.service.provenance import receipt, signing
from tests.api.server import Server, err, ok, pal_command, provision, start


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, Any]]]:
    data_dir = tmp_path_factory.mktemp("prov") / "data"
    members = provision(data_dir, (("alice", "human"), ("bot", "agent")))
    server = start(data_dir)
    try:
        yield server, members
    finally:
        server.stop()


def _memory(server: Server, token: str, bot: str) -> str:
    with server.client(token) as c:
        mid: str = ok(c.post("/v1/memories", json={"name": "shared", "description": "d"}))["id"]
        ok(c.post(f"/v1/memories/{mid}/grants",
                  json={"principal": f"member:{bot}", "privileges": ["read", "write"]}))
    return mid


def _head(c: httpx.Client, mid: str) -> str:
    refs = ok(c.get(f"/api/memory/{mid}/refs"))
    refs = refs["refs"] if isinstance(refs, dict) else refs
    return str(next(r["head_changeset_id"] for r in refs
                    if r["ref_name"] == "refs/shared/main"))


def test_keys_are_published_and_every_write_is_signed(world: tuple[Server, dict[str, Any]]
                                                      ) -> None:
    server, members = world
    mid = _memory(server, members["alice"].token, members["bot"].id)
    with server.client(members["bot"].token) as c:
        keys = signing.trusted_keys(ok(c.get("/v1/provenance/keys")))
        ok(c.post(f"/v1/memories/{mid}/records", json={"content": "a signed fact"}))
        cid = _head(c, mid)
        doc = ok(c.get(f"/v1/memories/{mid}/changesets/{cid}/signatures"))
    data = base64.b64decode(doc["canonical"])
    [sig] = doc["signatures"]
    assert sig["key_id"] in keys
    assert signing.problem(sig["public_key"], sig["signature"], data) is None


def test_a_member_registers_a_key_and_signs_over_http(world: tuple[Server, dict[str, Any]]
                                                      ) -> None:
    server, members = world
    mid = _memory(server, members["alice"].token, members["bot"].id)
    me = new_identity("bot")
    with server.client(members["bot"].token) as c:
        weak = err(c.post("/v1/members/me/keys",
                          json={"public_key": b64_nopad(b"\x01" + bytes(31))}),
                   422, "memory_invalid")
        assert "small-order" in weak["message"]
        ok(c.post("/v1/members/me/keys", json={"public_key": me.public_key_text}))
        assert [k["key_id"] for k in ok(c.get("/v1/members/me/keys"))["data"]] == [me.actor]
        ok(c.post(f"/v1/memories/{mid}/records", json={"content": "mine, signed by me"}))
        cid = _head(c, mid)
        url = f"/v1/memories/{mid}/changesets/{cid}/signatures"
        data = base64.b64decode(ok(c.get(url))["canonical"])
        bad = err(c.post(url, json={"public_key": me.public_key_text,
                                    "signature": b64_nopad(me.sign(data[:-1]))}),
                  422, "memory_invalid")
        assert "does not verify" in bad["message"]
        doc = ok(c.post(url, json={"public_key": me.public_key_text,
                                   "signature": b64_nopad(me.sign(data))}))
    assert [s["role"] for s in doc["signatures"]] == ["server", "member"]


def test_admin_key_show_and_rotate(tmp_path: Path) -> None:
    data = tmp_path / "data"

    def pal(*args: str) -> Any:
        done = subprocess.run(pal_command("admin", "--data-dir", str(data), "--create", "key",
                                          *args, "--json"), capture_output=True, check=True)
        return json.loads(done.stdout)

    first = pal("show")
    assert [k["status"] for k in first["keys"]] == ["active"]
    rotated = pal("rotate")
    assert [k["status"] for k in rotated["keys"]] == ["retired", "active"]
    assert rotated["keys"][0]["key_id"] == first["keys"][0]["key_id"]
    assert pal("show") == rotated


def test_receipts_over_http_verify_offline(world: tuple[Server, dict[str, Any]]) -> None:
    server, members = world
    mid = _memory(server, members["alice"].token, members["bot"].id)
    with server.client(members["alice"].token) as c:
        keys = signing.trusted_keys(ok(c.get("/v1/provenance/keys")))
        made = ok(c.post(f"/v1/memories/{mid}/records",
                         json={"type": "fact", "content": "the deploy window is Friday",
                               "attributes": {"standing": True}}))
        got = ok(c.get(f"/v1/memories/{mid}/records/{made['id']}",
                       params={"include": "provenance"}))
        listed = ok(c.get(f"/v1/memories/{mid}/records", params={"include": "all,provenance"}))
        recalled = ok(c.post(f"/v1/memories/{mid}/recall",
                             json={"query": "deploy window", "include": ["provenance"]}))
        graphed = ok(c.post(f"/v1/memories/{mid}/graph", json={"include": ["provenance"]}))
        primed = ok(c.get(f"/v1/memories/{mid}/prime", params={"include": "provenance"}))
        err(c.get(f"/v1/memories/{mid}/records", params={"include": "everything"}),
            422, "memory_invalid")
    records = [got, *listed["data"], *(r["record"] for r in recalled["results"]),
               *(n["record"] for n in graphed["nodes"]), *primed["provenance"]]
    assert len(records) == 5
    for rec in records:
        assert receipt.check(rec, keys)["ok"]


def test_mcp_tools_return_receipts(world: tuple[Server, dict[str, Any]]) -> None:
    server, members = world
    mid = _memory(server, members["alice"].token, members["bot"].id)
    with server.client(members["bot"].token) as c:
        keys = signing.trusted_keys(ok(c.get("/v1/provenance/keys")))
        made = ok(c.post(f"/v1/memories/{mid}/records", json={"content": "tea is at four"}))

    async def run() -> list[dict[str, Any]]:
        out = []
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {members['bot'].token}"},
                                  timeout=60)
        async with Client(streamable_http_client(f"{server.url}/mcp",
                                                 http_client=http)) as client:
            for name, args in (
                    ("memory_get", {"memory": mid, "record": made["id"],
                                    "include": ["provenance"]}),
                    ("memory_recall", {"memory": mid, "query": "tea", "include": ["provenance"]}),
                    ("memory_graph", {"memory": mid, "include": ["provenance"]})):
                result = await client.call_tool(name, args)
                block = result.content[0]
                assert isinstance(block, types.TextContent) and not result.is_error, block
                out.append(_fenced(block.text))
        return out

    got, recalled, graphed = anyio.run(run)
    for rec in (got, recalled["results"][0]["record"], graphed["nodes"][0]["record"]):
        assert receipt.check(rec, keys)["ok"]


def _fenced(text: str) -> Any:
    inner = text.split("<untrusted-data>\n", 1)[1].rsplit("\n</untrusted-data>", 1)[0]
    return json.loads(inner)
