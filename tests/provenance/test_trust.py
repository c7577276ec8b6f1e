"""Trust you can filter by: recall and prime admit records by their provenance (reviewed by
someone other than the writer, written by a person or an agent, signed by a key), prime leaves
unreviewed agent writes out where review is required, over the service, HTTP, MCP and the
client."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.streamable_http import streamable_http_client

from mcp import Client
from palimpsest.client import Client as PalClient
from palimpsest.errors import InvalidInput
from palimpsest.identity import b64_nopad, new_identity
from palimpsest.service import MemoryService
from palimpsest.service.memorygit.reviewed import ReviewedWrites
from palimpsest.service.memorygit.wiring import open_flow
from palimpsest.service.model import Caller
from tests.api.server import ok, provision, start

STANDING = {"standing": True}


def _setup(svc: MemoryService, owner: Caller) -> tuple[str, dict[str, str], str]:
    """A memory with a person's write, an agent's direct write (countersigned by the agent's
    own key), then review required and an agent's write merged by the person; returns the
    memory, record ids by name and the agent's key id."""
    mid = svc.create_memory(owner, {"name": "team"})["id"]
    bot = svc.caller(svc.create_member("bot", "agent").id)
    svc.put_grant(owner, mid, {"principal": f"member:{bot.member.id}",
                               "privileges": ["read", "write"]})
    ids = {"human": svc.remember(owner, mid, {"content": "the oncall rota is weekly",
                                              "attributes": STANDING})["id"],
           "agent": svc.remember(bot, mid, {"content": "the oncall pager is loud",
                                            "attributes": STANDING})["id"]}
    me = new_identity("bot")
    svc.register_key(bot, {"public_key": me.public_key_text})
    head = svc.list_refs(owner, mid)["data"][0]["head_changeset_id"]
    doc = svc.changeset_signatures(bot, mid, head)
    svc.sign_changeset(bot, mid, head, {"public_key": me.public_key_text, "signature":
                                        b64_nopad(me.sign(base64.b64decode(doc["canonical"])))})
    flow = open_flow(svc)
    who = f"member:{owner.member.id}"
    ReviewedWrites(flow).put_settings(who, mid, {"review_required": True})
    pending = svc.remember(bot, mid, {"content": "the oncall handover is Monday",
                                      "attributes": STANDING})
    flow.review(who, pending["proposal_id"], {"verdict": "approve"})
    flow.merge(who, mid, flow.authorize(who, pending["proposal_id"], {}))
    listed = svc.list_records(owner, mid)["data"]
    ids["reviewed"] = next(r["id"] for r in listed if "handover" in r["content"][0]["text"])
    return mid, ids, me.actor


def _recalled(svc: MemoryService, who: Caller, mid: str, wanted: Any) -> set[str]:
    answer = svc.recall(who, mid, {"text": "oncall", "limit": 20, "x.pal.provenance": wanted})
    return {r["record"]["id"] for r in answer["results"]}


def test_recall_admits_by_provenance(svc: MemoryService, owner: Caller) -> None:
    mid, ids, agent_key = _setup(svc, owner)
    everything = _recalled(svc, owner, mid, "any")
    assert everything == set(ids.values())
    assert _recalled(svc, owner, mid, {"written_by": "human"}) == {ids["human"]}
    assert _recalled(svc, owner, mid, {"written_by": "agent"}) == {ids["agent"], ids["reviewed"]}
    assert _recalled(svc, owner, mid, {"reviewed_by_other": True}) == {ids["reviewed"]}
    assert _recalled(svc, owner, mid, "reviewed_by_other,written_by:human") == set()
    assert _recalled(svc, owner, mid, {"signed_by": agent_key}) == {ids["agent"]}
    server_key = svc.provenance_keys()["keys"][0]
    assert _recalled(svc, owner, mid, {"signed_by": server_key["key_id"]}) == everything
    assert _recalled(svc, owner, mid, {"signed_by": server_key["public_key"]}) == everything
    assert _recalled(svc, owner, mid, {"signed_by": "0" * 64}) == set()
    answer = svc.recall(owner, mid, {"text": "oncall", "x.pal.provenance": {"written_by":
                                                                          "human"}})
    assert answer["x.pal.provenance"]["written_by"] == "human"  # says what it applied
    for bad in ({"written_by": "robot"}, {"nonsense": True}, {"reviewed_by_other": "yes"}, 7):
        with pytest.raises(InvalidInput):
            svc.recall(owner, mid, {"text": "oncall", "x.pal.provenance": bad})


def test_prime_leaves_unreviewed_agent_writes_out_where_review_is_required(
        svc: MemoryService, owner: Caller) -> None:
    mid, ids, _key = _setup(svc, owner)
    primed = svc.prime(owner, mid, 4000)
    assert set(primed["records"]) == {ids["human"], ids["reviewed"]}
    assert primed["x.pal.provenance"]["unreviewed_agents"] is False
    assert set(svc.prime(owner, mid, 4000, provenance="any")["records"]) == set(ids.values())
    assert svc.prime(owner, mid, 4000, provenance="written_by:human")["records"] == [
        ids["human"]]
    # where no review is required, prime filters nothing by default
    other = svc.create_memory(owner, {"name": "free"})["id"]
    bot = svc.caller(next(m.id for m in svc.list_members() if m.type == "agent"))
    svc.put_grant(owner, other, {"principal": f"member:{bot.member.id}",
                                 "privileges": ["read", "write"]})
    made = svc.remember(bot, other, {"content": "agents write here", "attributes": STANDING})
    plain = svc.prime(owner, other, 4000)
    assert plain["records"] == [made["id"]] and "x.pal.provenance" not in plain


def test_the_capability_document_declares_the_filter(svc: MemoryService,
                                                     owner: Caller) -> None:
    doc = svc.providers(owner)["data"][0]
    declared = doc["x.pal.provenance"]
    assert declared["recall"] and declared["prime"]
    assert set(declared["filters"]) == {"reviewed_by_other", "written_by", "signed_by",
                                        "unreviewed_agents"}


def test_the_filter_over_http_mcp_and_the_client(tmp_path: Path) -> None:
    members = provision(tmp_path / "data", (("alice", "human"), ("bot", "agent")))
    server = start(tmp_path / "data")
    try:
        with server.client(members["alice"].token) as c:
            mid = ok(c.post("/v1/memories", json={"name": "m"}))["id"]
            ok(c.post(f"/v1/memories/{mid}/grants", json={
                "principal": f"member:{members['bot'].id}", "privileges": ["read", "write"]}))
            mine = ok(c.post(f"/v1/memories/{mid}/records", json={
                "content": "the lab opens at nine", "attributes": STANDING}))["id"]
        with server.client(members["bot"].token) as c:
            bots = ok(c.post(f"/v1/memories/{mid}/records", json={
                "content": "the lab key is at the desk", "attributes": STANDING}))["id"]
            got = ok(c.post(f"/v1/memories/{mid}/recall", json={
                "text": "lab", "x.pal.provenance": {"written_by": "human"}}))
            assert [r["record"]["id"] for r in got["results"]] == [mine]
            primed = ok(c.get(f"/v1/memories/{mid}/prime",
                              params={"provenance": "written_by:agent"}))
            assert primed["records"] == [bots]
            assert c.post(f"/v1/memories/{mid}/recall", json={
                "text": "lab", "x.pal.provenance": {"written_by": "robot"}}).status_code == 422
        with PalClient(server.url, members["bot"].token) as client:
            viaclient = client.recall(mid, "lab", provenance="written_by:agent")
            assert [r["record"]["id"] for r in viaclient["results"]] == [bots]
            assert client.prime(mid, 4000, provenance="written_by:human")["records"] == [mine]

        async def run() -> Any:
            http = httpx2.AsyncClient(headers={"Authorization":
                                               f"Bearer {members['bot'].token}"}, timeout=60)
            async with Client(streamable_http_client(f"{server.url}/mcp",
                                                     http_client=http)) as mcp:
                result = await mcp.call_tool("memory_recall", {
                    "memory": mid, "text": "lab", "provenance": {"written_by": "human"}})
                block = result.content[0]
                assert isinstance(block, types.TextContent) and not result.is_error, block
                inner = block.text.split("<untrusted-data>\n", 1)[1].rsplit(
                    "\n</untrusted-data>", 1)[0]
                return json.loads(inner)

        answer = anyio.run(run)
        assert [r["record"]["id"] for r in answer["results"]] == [mine]
    finally:
        server.stop()
