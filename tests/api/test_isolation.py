"""Isolation with several credentials — what the public suite (one credential) cannot check.

A member never sees, counts or learns the existence of a memory it holds no privilege on; a
restricted branch stops inherited grants; recall, graph and record ids never cross into
unreadable memories; an agent reaches through a group exactly as a person would.

The tree (built by the owner):

    Company                 group:team (bob) read; alice read
    ├── Sales
    └── Vault  restricted   (nobody but the owner)
        └── Deal            bob read (a grant inside the closed branch)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.server import Server, err, ok
from tests.conftest import BOTH

BACKENDS = BOTH  # reach and refusals are the store's reads


@pytest.fixture(scope="module")
def tree(server: Server, members: dict[str, Any]) -> Iterator[dict[str, Any]]:
    with server.client(members["owner"].token) as owner:
        company = ok(owner.post("/v1/memories", json={"name": "Company"}))["id"]
        sales = ok(owner.post("/v1/memories", json={"name": "Sales", "parent_id": company}))["id"]
        vault = ok(owner.post("/v1/memories", json={"name": "Vault", "parent_id": company,
                                                     "restricted": True}))["id"]
        deal = ok(owner.post("/v1/memories", json={"name": "Deal", "parent_id": vault}))["id"]
        records = {}
        for mid, text in ((company, "okapi plan for the company"),
                          (sales, "okapi pipeline in sales"),
                          (vault, "okapi secret in the vault"),
                          (deal, "okapi terms of the deal")):
            records[mid] = ok(owner.post(f"/v1/memories/{mid}/records",
                                         json={"type": "fact", "content": text}))["id"]
        secret_entity = ok(owner.post(f"/v1/memories/{vault}/records", json={
            "type": "entity", "title": "Hidden Partner", "content": ""}))["id"]
        visible_entity = ok(owner.post(f"/v1/memories/{sales}/records", json={
            "type": "entity", "title": "Acme", "content": ""}))["id"]
        cross_fact = ok(owner.post(f"/v1/memories/{sales}/records", json={
            "type": "fact", "content": "Acme partners with someone", "references": [
                {"rel": "subject", "memory_id": sales, "record_id": visible_entity},
                {"rel": "object", "memory_id": vault, "record_id": secret_entity}]}))["id"]
        team = members["group:team"]
        ok(owner.post(f"/v1/memories/{company}/grants",
                      json={"principal": f"group:{team}", "privileges": ["read"]}))
        ok(owner.post(f"/v1/memories/{company}/grants",
                      json={"principal": f"member:{members['alice'].id}",
                            "privileges": ["read"]}))
        ok(owner.post(f"/v1/memories/{deal}/grants",
                      json={"principal": f"member:{members['bob'].id}",
                            "privileges": ["read"]}))
    yield {"company": company, "sales": sales, "vault": vault, "deal": deal,
           "records": records, "secret_entity": secret_entity,
           "visible_entity": visible_entity, "cross_fact": cross_fact}


@pytest.fixture(scope="module")
def bob(server: Server, members: dict[str, Any]) -> Iterator[httpx.Client]:
    with server.client(members["bob"].token) as client:
        yield client


@pytest.fixture(scope="module")
def alice(server: Server, members: dict[str, Any]) -> Iterator[httpx.Client]:
    with server.client(members["alice"].token) as client:
        yield client


@pytest.fixture(scope="module")
def carol(server: Server, members: dict[str, Any]) -> Iterator[httpx.Client]:
    with server.client(members["carol"].token) as client:
        yield client


def _hidden(tree: dict[str, Any]) -> list[str]:
    """Ids bob and alice must never learn: the vault and everything only the vault holds."""
    return [tree["vault"], tree["records"][tree["vault"]], tree["secret_entity"]]


def _assert_never_mentions(response: httpx.Response, needles: list[str]) -> None:
    text = response.text
    for needle in needles:
        assert needle not in text, (needle, text[:500])
    assert "okapi secret" not in text and "Hidden Partner" not in text


def test_group_grant_reaches_an_agent_and_the_cutoff_stops_it(
        bob: httpx.Client, tree: dict[str, Any]) -> None:
    entries = ok(bob.get("/v1/memories"))
    # bob holds read on Company (via team) and on Deal; Deal's parent (Vault) is invisible to
    # him, so Deal is an entry point too.
    assert {m["id"] for m in entries["data"]} == {tree["company"], tree["deal"]}
    company = ok(bob.get(f"/v1/memories/{tree['company']}"))
    assert company["privileges"] == ["read"]
    assert company["children"]["count"] == 1  # Vault is not counted
    children = ok(bob.get("/v1/memories", params={"parent": tree["company"]}))
    assert [m["id"] for m in children["data"]] == [tree["sales"]]
    below = ok(bob.get("/v1/memories", params={"ancestor": tree["company"]}))
    assert {m["id"] for m in below["data"]} == {tree["sales"], tree["deal"]}
    deal = ok(bob.get(f"/v1/memories/{tree['deal']}"))
    assert deal["privileges"] == ["read"]
    for response in (entries, company, children, below, deal):
        assert tree["vault"] not in json.dumps(response)


def test_unknown_and_forbidden_are_indistinguishable(bob: httpx.Client, carol: httpx.Client,
                                                     tree: dict[str, Any]) -> None:
    vault, ghost = tree["vault"], "hmem_doesnotexist0000"
    probes: list[tuple[str, str, dict[str, Any] | None]] = [
        ("GET", "/v1/memories/{}", None),
        ("GET", "/v1/memories/{}/records", None),
        ("GET", "/v1/memories/{}/grants", None),
        ("GET", "/v1/memories/{}/prime", None),
        ("GET", "/v1/memories/{}/snapshots", None),
        ("POST", "/v1/memories/{}/recall", {"text": "okapi"}),
        ("POST", "/v1/memories/{}/graph", {}),
        ("POST", "/v1/memories/{}/records", {"content": "intrusion"}),
        ("PUT", "/v1/memories/{}", {"name": "renamed"}),
        ("DELETE", "/v1/memories/{}", None),
        ("POST", "/v1/memories", {"name": "child", "parent_id": "{}"}),
        ("GET", "/v1/memories?parent={}", None),
        ("GET", "/v1/memories?ancestor={}", None),
    ]
    for client in (bob, carol):
        for method, template, body in probes:
            answers = []
            for target in (vault, ghost):
                path = template.format(target)
                payload = None if body is None else {
                    k: (target if v == "{}" else v) for k, v in body.items()}
                response = client.request(method, path, json=payload)
                error = err(response, 404, "memory_not_found")
                answers.append(error)
            assert answers[0] == answers[1], (method, template, answers)


def test_recall_covers_readable_descendants_only(bob: httpx.Client, alice: httpx.Client,
                                                 tree: dict[str, Any]) -> None:
    records = tree["records"]
    response = bob.post(f"/v1/memories/{tree['company']}/recall",
                        json={"text": "okapi", "limit": 50})
    answer = ok(response)
    found = {r["record"]["id"]: r["memory"]["id"] for r in answer["results"]}
    # Company and Sales by inheritance, Deal by its own grant inside the closed branch.
    assert found == {records[tree["company"]]: tree["company"],
                     records[tree["sales"]]: tree["sales"],
                     records[tree["deal"]]: tree["deal"]}
    assert [c["id"] for c in answer["children"]] == [tree["sales"]]
    _assert_never_mentions(response, _hidden(tree))
    # alice holds read on Company only: the Vault branch, Deal included, is closed to her.
    response = alice.post(f"/v1/memories/{tree['company']}/recall", json={"text": "okapi"})
    found = {r["record"]["id"] for r in ok(response)["results"]}
    assert found == {records[tree["company"]], records[tree["sales"]]}
    _assert_never_mentions(response, [*_hidden(tree), tree["deal"], records[tree["deal"]]])
    # Down, never up: asking Deal never returns Company's record.
    up = ok(bob.post(f"/v1/memories/{tree['deal']}/recall", json={"text": "okapi"}))
    assert {r["record"]["id"] for r in up["results"]} == {records[tree["deal"]]}
    assert "parent" not in up or up["parent"] is None


def test_record_ids_never_cross_into_unreadable_memories(bob: httpx.Client,
                                                         tree: dict[str, Any]) -> None:
    hidden_record = tree["records"][tree["vault"]]
    through_sales = bob.get(f"/v1/memories/{tree['sales']}/records/{hidden_record}")
    ghost = bob.get(f"/v1/memories/{tree['sales']}/records/hrec_doesnotexist00")
    first = err(through_sales, 404, "memory_record_not_found")
    second = err(ghost, 404, "memory_record_not_found")
    assert first == second
    err(bob.get(f"/v1/memories/{tree['vault']}/records/{hidden_record}"), 404, "memory_not_found")
    err(bob.get(f"/v1/memories/{tree['vault']}/records/{hidden_record}/content/0"), 404,
        "memory_not_found")


def test_graph_and_references_mark_unreadable_targets(bob: httpx.Client,
                                                      tree: dict[str, Any]) -> None:
    response = bob.post(f"/v1/memories/{tree['sales']}/graph",
                        json={"around": tree["cross_fact"], "hops": 2})
    graph = ok(response)
    nodes = {n["record"]["id"] for n in graph["nodes"]}
    assert nodes == {tree["cross_fact"], tree["visible_entity"]}
    hidden_edges = [e for e in graph["edges"] if e["available"] is False]
    assert len(hidden_edges) == 1
    edge = hidden_edges[0]
    assert "rel" not in edge and "memory_id" not in edge["to"]
    assert edge["to"]["record_id"] == tree["secret_entity"]  # the id written on bob's record
    text = response.text.replace(tree["secret_entity"], "")  # the one id the record itself names
    for needle in (tree["vault"], "Hidden Partner", "okapi secret"):
        assert needle not in text
    record = ok(bob.get(f"/v1/memories/{tree['sales']}/records/{tree['cross_fact']}"))
    refs = record["references"]
    assert {"rel": "subject", "memory_id": tree["sales"],
            "record_id": tree["visible_entity"]} in refs
    assert {"record_id": tree["secret_entity"], "available": False} in refs
    assert tree["vault"] not in json.dumps(record)


def test_write_privileges_are_checked_per_memory(bob: httpx.Client, carol: httpx.Client,
                                                 tree: dict[str, Any]) -> None:
    err(bob.post(f"/v1/memories/{tree['sales']}/records", json={"content": "intrusion"}), 403,
        "memory_forbidden")
    err(bob.post("/v1/memories", json={"name": "x", "parent_id": tree["sales"]}), 403,
        "memory_forbidden")
    err(bob.post(f"/v1/memories/{tree['sales']}/grants",
                 json={"principal": "member:anyone", "privileges": ["read"]}), 403,
        "memory_forbidden")
    err(bob.post(f"/v1/memories/{tree['sales']}/erase",
                 json={"record_ids": [tree["records"][tree["sales"]]]}), 403, "memory_forbidden")
    err(carol.post(f"/v1/memories/{tree['sales']}/records", json={"content": "intrusion"}), 404,
        "memory_not_found")


def test_a_member_without_grants_sees_nothing(carol: httpx.Client) -> None:
    assert ok(carol.get("/v1/memories"))["data"] == []
    assert ok(carol.get("/v1/memories", params={"granted": "true"}))["data"] == []


def test_granted_listing(bob: httpx.Client, tree: dict[str, Any]) -> None:
    granted = ok(bob.get("/v1/memories", params={"granted": "true"}))["data"]
    ids = [m["id"] for m in granted]
    assert set(ids) == {tree["company"], tree["deal"]}
    assert tree["vault"] not in json.dumps(granted)


def test_granted_listing_names_where_privileges_change(server: Server, members: dict[str, Any],
                                                       alice: httpx.Client,
                                                       tree: dict[str, Any]) -> None:
    """``?granted=true``: the entry points, plus every memory below them where what the caller
    may do differs from its parent, each with the privileges there, highest first."""
    with server.client(members["owner"].token) as owner:
        ok(owner.post(f"/v1/memories/{tree['sales']}/grants",
                      json={"principal": f"member:{members['alice'].id}",
                            "privileges": ["write"]}))
    granted = ok(alice.get("/v1/memories", params={"granted": "true"}))["data"]
    assert [(m["id"], m["privileges"]) for m in granted] == [
        (tree["company"], ["read"]), (tree["sales"], ["read", "write"])]
    assert tree["vault"] not in json.dumps(granted)
