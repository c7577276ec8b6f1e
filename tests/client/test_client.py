"""``palimpsest.client`` against a real ``pal serve`` over a socket: every group of routes, the
synchronous and the asynchronous client, and refusals as the project's error tree."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from palimpsest.client import UNSET, AsyncClient, Client
from palimpsest.errors import Conflict, Forbidden, InvalidInput, NotFound, Unavailable
from tests.api.server import Server

World = tuple[Server, dict[str, Any]]


@pytest.fixture(scope="module")
def owner(live: World) -> Any:
    server, members = live
    with Client(server.url, members["owner"].token) as client:
        yield client


def test_tree_grants_and_records(live: World, owner: Client) -> None:
    _, members = live
    assert owner.discovery()["capabilities"]["memories"] is True
    assert owner.providers()["data"][0]["id"]
    assert any(t["type"] == "fact" for t in owner.types()["data"])
    team = owner.memories.create("Team", description="what the team decided",
                                 idempotency_key="team-1")
    again = owner.memories.create("Team", description="what the team decided",
                                  idempotency_key="team-1")
    assert again == team  # the same request under the same key: the first answer
    child = owner.memories.create("Acme", parent_id=team["id"])
    assert child["parent_id"] == team["id"]
    listed = owner.memories.list(parent=team["id"])
    assert [m["id"] for m in listed["data"]] == [child["id"]]
    moved = owner.memories.update(child["id"], parent_id=None)
    assert moved["parent_id"] is None
    renamed = owner.memories.update(child["id"], name="Acme Corp", parent_id=UNSET)
    assert renamed["name"] == "Acme Corp" and renamed["parent_id"] is None
    assert owner.memories.update(child["id"], parent_id=team["id"])["parent_id"] == team["id"]

    grant = owner.grants.put(team["id"], f"member:{members['ada'].id}", ["read", "write"])
    assert {g["id"] for g in owner.grants.list(team["id"])["data"]} >= {grant["id"]}

    fact = owner.records.remember(child["id"], "Acme renews every March.", type="fact",
                                  title="Acme renews", attributes={"account": "acme"})
    assert fact["object"] == "memory.record"
    assert fact["trust"] == "untrusted" and fact["written_by"]["id"] == members["owner"].id
    revised = owner.records.revise(child["id"], fact["id"],
                                   content="Acme renews every March; 60 days notice.")
    assert revised["version"] == 2
    history = owner.records.history(child["id"], fact["id"])
    assert [v["version"] for v in history["data"]] == [1, 2]
    assert owner.records.get(child["id"], fact["id"])["version"] == 2
    page = owner.records.list(child["id"], include="all")
    assert fact["id"] in [r["id"] for r in page["data"]]

    hits = owner.recall(team["id"], "when does Acme renew")
    assert hits["results"][0]["record"]["id"] == fact["id"]
    assert hits["results"][0]["memory"]["id"] == child["id"]  # found below, named

    upload = owner.files.upload(b"quarterly numbers\n", media_type="text/plain", name="q3.txt")
    note = owner.records.remember(child["id"], [
        {"type": "text", "text": "Q3 attached"},
        {"type": "file", "file": {"id": upload["id"]}, "text": "Q3 table"}], type="note")
    assert owner.records.content(child["id"], note["id"], 1) == b"quarterly numbers\n"

    forgotten = owner.records.forget(child["id"], note["id"])
    assert forgotten["status"] == "forgotten"
    erased = owner.records.erase(child["id"], [note["id"]])
    assert erased["erased"] == [note["id"]]
    owner.grants.delete(team["id"], grant["id"])
    gone = owner.memories.delete(child["id"])
    assert gone["memories"] == [child["id"]]


def test_graph_prime_observe_queries_snapshots_consolidations_harness(
        live: World, owner: Client) -> None:
    _, members = live
    m = owner.memories.create("Ops")["id"]
    owner.records.remember(m, "Answer within one business day.", type="procedure",
                           attributes={"standing": True})
    primed = owner.prime(m, 4000)
    assert "one business day" in primed["text"] and primed["tokens"] > 0
    dana = owner.records.remember(m, "", type="entity", title="Dana")
    acme = owner.records.remember(m, "", type="entity", title="Acme")
    owner.records.remember(m, "Dana buys for Acme", type="fact", references=[
        {"rel": "subject", "memory_id": m, "record_id": dana["id"]},
        {"rel": "object", "memory_id": m, "record_id": acme["id"]}])
    graph = owner.graph(m, around=dana["id"], hops=2)
    assert {n["record"]["id"] for n in graph["nodes"]} >= {dana["id"], acme["id"]}

    observed = owner.observe(m, [{"content": "user: hi"}, {"content": "assistant: hello"}])
    assert len(observed["data"]) == 2 or "job" in observed

    owner.queries.put(m, "facts", language="recall", body={"text": "Dana", "types": ["fact"]})
    assert [q["name"] for q in owner.queries.list(m)["data"]] == ["facts"]
    ran = owner.queries.run(m, "facts")
    assert [h["record"]["content"][0]["text"] for h in ran["results"]] == ["Dana buys for Acme"]
    with pytest.raises(InvalidInput) as refused:
        owner.queries.free(m, "cypher", "MATCH (n) RETURN n")
    assert refused.value.code == "memory_unsupported"

    snap = owner.snapshots.create(m, "before-consolidation")
    assert [s["id"] for s in owner.snapshots.list(m)["data"]] == [snap["id"]]
    run = owner.consolidations.start(m)
    assert owner.consolidations.get(m, run["id"])["id"] == run["id"]
    assert run["id"] in [r["id"] for r in owner.consolidations.list(m)["data"]]
    assert "data" in owner.consolidations.changes(m, run["id"])
    owner.consolidations.revert(m, run["id"])

    agent = members["ada"].id
    owner.grants.put(m, f"member:{agent}", ["read", "write"])
    with Client(live[0].url, members["ada"].token) as ada:
        settings = ada.harnesses.put(agent, default_memory_id=m, observe=False)
        assert settings["default_memory_id"] == m and settings["observe"] is False
        assert ada.harnesses.get(agent)["default_memory_id"] == m


def test_refusals_carry_code_message_and_hint(live: World, owner: Client) -> None:
    server, members = live
    with pytest.raises(NotFound) as missing:
        owner.memories.get("hmem_does_not_exist")
    assert missing.value.code == "memory_not_found"
    assert missing.value.message == "no such memory within your reach"
    assert missing.value.hint and "list your memories" in missing.value.hint
    with Client(server.url, "pal_hcred_nope_nope") as wrong, pytest.raises(Forbidden) as bad:
        wrong.memories.list()
    assert bad.value.code == "invalid_credential"
    m = owner.memories.create("Keys")["id"]
    owner.records.remember(m, "one", idempotency_key="k1")
    with pytest.raises(Conflict) as reused:
        owner.records.remember(m, "two", idempotency_key="k1")
    assert reused.value.code == "x.pal.idempotency_mismatch"
    with Client(server.url, members["bo"].token) as bo, pytest.raises(NotFound):
        bo.records.list(m)  # forbidden looks like unknown
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}", "x") as nowhere, \
            pytest.raises(Unavailable) as down:
        nowhere.discovery()
    assert down.value.code == "unreachable" and "pal serve" in (down.value.hint or "")


def test_memory_git_flow_and_its_error_body(live: World, owner: Client) -> None:
    server, members = live
    project = owner.memories.create("Reviewed")["id"]
    owner.grants.put(project, f"member:{members['ada'].id}", ["read", "write"])
    git = owner.memory_git
    root = git.init(project)
    assert root["ref"]["ref_name"] == "refs/shared/main"
    assert project in git.projects()["projects"]
    with Client(server.url, members["ada"].token) as ada:
        mine = f"refs/agents/{members['ada'].id}/main"
        shared = ada.memory_git.ref(project, "refs/shared/main")
        ada.memory_git.branch(project, mine, shared["head_changeset_id"] or "")
        made = ada.memory_git.commit(project, mine, [
            {"op_type": "add_memory", "payload": {"content": "Acme renews in March",
                                                  "kind": "fact"}}],
            expected_head=shared["head_changeset_id"], idempotency_key="c1", message="cli")
        assert ada.memory_git.changeset(made["changeset_id"])["ops"][0]["op_type"] \
            == "add_memory"
        assert made["changeset_id"] in [c["changeset_id"] for c in
                                        ada.memory_git.log(project, ref=mine)["changesets"]]
        with pytest.raises(Conflict) as stale:
            ada.memory_git.commit(project, mine, [{"op_type": "add_memory",
                                                   "payload": {"content": "x"}}],
                                  expected_head=shared["head_changeset_id"],
                                  idempotency_key="c2")
        assert stale.value.code == "cas-mismatch"  # the {"error","message"} body
        assert ada.memory_git.diff(made["changeset_id"])["memories_added"]
        proposal = ada.memory_git.propose(project, mine, idempotency_key="p1")
        with pytest.raises(Forbidden):
            ada.memory_git.review(proposal["proposal_id"], "approve")  # no self-review
    git.review(proposal["proposal_id"], "approve", comment="checked")
    merged = git.merge(project, git.authorize(proposal["proposal_id"]))
    assert merged["ref"]["head_changeset_id"] == made["changeset_id"]
    context = git.context(project, query="renews")
    assert [m["content"] for m in context["memories"]] == ["Acme renews in March"]
    assert git.proposal(proposal["proposal_id"])["status"] == "merged"
    assert [p["proposal_id"] for p in git.proposals(project)] == [proposal["proposal_id"]]
    assert git.settings(project)["review_required"] is False
    assert {r["ref_name"] for r in git.refs(project)} >= {"refs/shared/main", mine}


def test_async_client_writes_concurrently(live: World) -> None:
    server, members = live

    async def scenario() -> tuple[list[Any], Any]:
        async with AsyncClient(server.url, members["owner"].token) as pal:
            m = (await pal.memories.create("Async"))["id"]
            made = await asyncio.gather(*(
                pal.records.remember(m, f"note {i}", type="note", idempotency_key=f"a{i}")
                for i in range(16)))
            listed = await pal.records.list(m, limit=50)
            with pytest.raises(NotFound):
                await pal.records.get(m, "hrec_nope")
            return list(made), listed

    made, listed = asyncio.run(scenario())
    assert len({r["id"] for r in made}) == 16
    assert {r["id"] for r in listed["data"]} == {r["id"] for r in made}
