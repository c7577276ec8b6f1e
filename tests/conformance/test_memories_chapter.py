"""UHP Memories conformance: checks ME-01 … ME-13, over real HTTP against ``pal serve``.

The suite's memories checks run with ONE credential against a server that reports the
capability and has a provider connected (uhp-memories.md §15). The check code of the suite is
not public, so every check here is written from the chapter's own scope list:

- ME-01 … ME-09 are public checks (suite 2026.10.4 and its patches), but their code is not; the
  assertions below are our reading of the published scope. ME-01 … ME-08 take the chapter's
  scope items in the order it lists them (tree and listing; stated record and stamped writer;
  recall down never up; signals against the capability document; revision and history; record
  refused through another memory; forget and erase; move and delete); ME-09 is content parts.
- ME-10 … ME-13 have no public text. They are **ours**: the last scope item (the graph), the
  capability document's truthfulness, and two the requirements add (prime; ``as_of`` and
  snapshots).

The server is started exactly as a user starts it (``pal serve`` on a fresh data directory);
the one credential is the owner credential printed on that first start.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.server import Server, err, ok, start
from tests.conftest import BOTH, Backend

BACKENDS = BOTH  # the chapter holds on either store


@pytest.fixture(scope="module")
def served(module_backend: Backend) -> Iterator[Server]:
    server = start(module_backend.data_dir, *module_backend.serve_args())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def api(served: Server) -> Iterator[httpx.Client]:
    assert served.owner, "first start must print the owner credential"
    with served.client(served.owner) as client:
        yield client


def _memory(api: httpx.Client, name: str, parent: str | None = None, **extra: Any) -> Any:
    body: dict[str, Any] = {"name": name, "description": f"{name} memory", **extra}
    if parent is not None:
        body["parent_id"] = parent
    return ok(api.post("/v1/memories", json=body))


def _remember(api: httpx.Client, mid: str, body: dict[str, Any]) -> Any:
    return ok(api.post(f"/v1/memories/{mid}/records", json=body))


def _provider(api: httpx.Client) -> Any:
    docs = ok(api.get("/v1/memories/providers"))["data"]
    assert len(docs) >= 1
    return docs[0]


def test_capability_reported(api: httpx.Client) -> None:
    """Precondition of every ME check: the capability and a connected provider."""
    assert ok(api.get("/v1/uhp"))["capabilities"]["memories"] is True
    provider = _provider(api)
    assert {"id", "isolation"} <= set(provider)


def test_me01_tree_and_listing(api: httpx.Client) -> None:
    """ME-01 (public): the tree and its listing — one level at a time, entry points,
    ``?parent=``, ``?ancestor=``; opaque ids (no prefix asserted since post2)."""
    root = _memory(api, "Company")
    child = _memory(api, "Customers", root["id"])
    grandchild = _memory(api, "Acme", child["id"])
    assert root["object"] == "memory" and root["parent_id"] is None
    assert child["parent_id"] == root["id"] and child["ancestors"] == [root["id"]]
    assert grandchild["ancestors"] == [root["id"], child["id"]]
    assert set(root["privileges"]) == {"read", "write", "create", "delete"}  # creator's grant
    assert child["provider"] == root["provider"]  # inherited when omitted
    entries = [m["id"] for m in ok(api.get("/v1/memories"))["data"]]
    assert root["id"] in entries
    assert child["id"] not in entries and grandchild["id"] not in entries  # one level
    children = ok(api.get("/v1/memories", params={"parent": root["id"]}))["data"]
    assert [m["id"] for m in children] == [child["id"]]
    below = {m["id"] for m in ok(api.get("/v1/memories", params={"ancestor": root["id"]}))["data"]}
    assert below == {child["id"], grandchild["id"]}
    got = ok(api.get(f"/v1/memories/{root['id']}"))
    assert got["children"]["count"] == 1 and got["records"]["count"] == 0
    assert isinstance(got["createdAt"], int) and isinstance(got["updatedAt"], int)


def test_me02_stated_record_and_stamped_writer(served: Server, api: httpx.Client) -> None:
    """ME-02 (public, post1): a stated record comes back with ``content`` as a list and
    ``written_by`` stamped from the credential; a client cannot supply the writer."""
    mid = _memory(api, "Notes")["id"]
    record = _remember(api, mid, {"type": "fact", "title": "Acme renews in March",
                                  "content": "Acme renews its contract every March.",
                                  "attributes": {"account": "acme"}})
    assert record["object"] == "memory.record" and record["memory_id"] == mid
    assert record["content"] == [{"type": "text", "text": "Acme renews its contract every March."}]
    assert record["version"] == 1 and record["status"] == "active"
    assert record["supersedes"] is None
    owner = served.announce["owner"]["member_id"]
    assert record["written_by"]["kind"] == "member" and record["written_by"]["id"] == owner
    assert record["trust"] == "untrusted"
    assert record["time"]["written_at"]
    again = ok(api.get(f"/v1/memories/{mid}/records/{record['id']}"))
    assert again == record
    forged = api.post(f"/v1/memories/{mid}/records", json={
        "content": "x", "written_by": {"kind": "member", "id": "someone-else"}})
    err(forged, 422, "memory_invalid")


def test_me03_recall_down_never_up(api: httpx.Client) -> None:
    """ME-03 (public, post3): a question asked at a parent finds a record below it, each result
    names the memory it is in, and a record above the asked memory is never returned."""
    top = _memory(api, "Org")
    mid = _memory(api, "Team", top["id"])
    low = _memory(api, "Project", mid["id"])
    _remember(api, top["id"], {"content": "zebracorn budget lives at the top"})
    below = _remember(api, low["id"], {"content": "zebracorn budget is 40k for the project"})
    answer = ok(api.post(f"/v1/memories/{mid['id']}/recall", json={"text": "zebracorn budget"}))
    assert answer["object"] == "memory.recall"
    ids = [r["record"]["id"] for r in answer["results"]]
    assert ids == [below["id"]]
    result = answer["results"][0]
    assert result["memory"]["id"] == low["id"] and result["memory"]["name"] == "Project"
    assert result["record"]["trust"] == "untrusted" and "written_by" in result["record"]
    assert answer["parent"]["id"] == top["id"]
    assert [c["id"] for c in answer["children"]] == [low["id"]]
    assert isinstance(answer["degraded"], list) and isinstance(answer["abstain"], bool)
    # depth 0 searches the memory alone.
    alone = ok(api.post(f"/v1/memories/{mid['id']}/recall",
                        json={"text": "zebracorn budget", "depth": 0}))
    assert alone["results"] == []


def test_me04_signals_against_capability_document(api: httpx.Client) -> None:
    """ME-04 (public): each recall signal against the provider's own capability document — a
    declared signal is served (not in ``degraded``), an undeclared one is reported there."""
    mid = _memory(api, "Signals")["id"]
    _remember(api, mid, {"type": "note", "content": "quokka migration finished on Tuesday",
                         "attributes": {"team": "infra", "severity": 3}})
    _remember(api, mid, {"type": "fact", "content": "quokka servers run in Frankfurt",
                         "attributes": {"team": "ops"}})
    declared = set(_provider(api)["recall"]["signals"])
    probes: dict[str, dict[str, Any]] = {
        "query": {"query": "when did the quokka migration finish?"},
        "text": {"text": "quokka migration"},
        "filters": {"filters": {"field": "attributes.team", "op": "eq", "value": "infra"}},
    }
    for signal, body in probes.items():
        answer = ok(api.post(f"/v1/memories/{mid}/recall", json=body))
        flagged = [d for d in answer["degraded"] if d.split(":", 1)[0] == signal]
        if signal in declared:
            assert flagged == [], (signal, answer["degraded"])
            assert answer["results"], signal
            assert all(signal in r.get("why", [signal]) for r in answer["results"])
        else:
            assert flagged, (signal, answer["degraded"])
    if "filters" in declared:
        answer = ok(api.post(f"/v1/memories/{mid}/recall", json=probes["filters"]))
        assert {r["record"]["attributes"]["team"] for r in answer["results"]} == {"infra"}
    # A malformed filter is refused, not ignored.
    bad = api.post(f"/v1/memories/{mid}/recall",
                   json={"filters": {"field": "attributes.team", "op": "matches", "value": 1}})
    err(bad, 422, "memory_invalid")
    err(api.post(f"/v1/memories/{mid}/recall", json={}), 422, "memory_invalid")


def test_me05_revision_and_history(api: httpx.Client) -> None:
    """ME-05 (public): revision keeps the id, bumps the version, supersedes the previous one;
    history lists every version oldest first."""
    mid = _memory(api, "Revisions")["id"]
    first = _remember(api, mid, {"type": "fact", "content": "Acme has 40 seats"})
    second = ok(api.patch(f"/v1/memories/{mid}/records/{first['id']}",
                          json={"content": "Acme has 55 seats"}))
    assert second["id"] == first["id"]
    assert second["version"] == 2 and second["supersedes"] == 1
    assert second["content"] == [{"type": "text", "text": "Acme has 55 seats"}]
    history = ok(api.get(f"/v1/memories/{mid}/records/{first['id']}/history"))["data"]
    assert [(v["version"], v["status"]) for v in history] == [(1, "superseded"), (2, "active")]
    assert history[0]["content"] == first["content"]
    err(api.patch(f"/v1/memories/{mid}/records/{first['id']}", json={}), 422, "memory_invalid")


def test_me06_record_refused_through_another_memory(api: httpx.Client) -> None:
    """ME-06 (public): a record's id asked through a memory it is not in → 404
    ``memory_record_not_found``, for get, history, revise and forget alike."""
    a = _memory(api, "A")["id"]
    b = _memory(api, "B")["id"]
    record = _remember(api, a, {"content": "lives in A"})
    path = f"/v1/memories/{b}/records/{record['id']}"
    err(api.get(path), 404, "memory_record_not_found")
    err(api.get(f"{path}/history"), 404, "memory_record_not_found")
    err(api.patch(path, json={"content": "moved?"}), 404, "memory_record_not_found")
    err(api.delete(path), 404, "memory_record_not_found")
    assert ok(api.get(f"/v1/memories/{a}/records/{record['id']}"))["version"] == 1


def test_me07_forget_and_erase(api: httpx.Client) -> None:
    """ME-07 (public): forget keeps the trace; erase removes content and reports honestly what
    it could not reach (an id that is not in the memory is ``unreachable``)."""
    mid = _memory(api, "Forgetting")["id"]
    kept = _remember(api, mid, {"content": "to be forgotten"})
    gone = ok(api.delete(f"/v1/memories/{mid}/records/{kept['id']}"))
    assert gone["status"] == "forgotten" and gone["id"] == kept["id"]
    listed = ok(api.get(f"/v1/memories/{mid}/records"))["data"]
    assert kept["id"] not in [r["id"] for r in listed]
    everything = ok(api.get(f"/v1/memories/{mid}/records", params={"include": "all"}))["data"]
    assert kept["id"] in [r["id"] for r in everything]
    secret = _remember(api, mid, {"content": "erase-me-token-7781"})
    other = _memory(api, "Elsewhere")["id"]
    foreign = _remember(api, other, {"content": "not in this memory"})
    result = ok(api.post(f"/v1/memories/{mid}/erase",
                         json={"record_ids": [secret["id"], foreign["id"]]}))
    assert result["object"] == "memory.erasure"
    assert result["erased"] == [secret["id"]]
    assert result["unreachable"] == [foreign["id"]]
    recall = ok(api.post(f"/v1/memories/{mid}/recall", json={"text": "erase-me-token-7781",
                                                             "include": "all"}))
    assert recall["results"] == []
    for version in ok(api.get(f"/v1/memories/{mid}/records", params={"include": "all"}))["data"]:
        assert "erase-me-token-7781" not in str(version)
    assert ok(api.get(f"/v1/memories/{other}/records/{foreign['id']}"))["status"] == "active"
    err(api.post(f"/v1/memories/{mid}/erase", json={"record_ids": []}), 422, "memory_invalid")


def test_me11_providers_document(api: httpx.Client) -> None:
    """ME-11 (ours): the capability document is complete and truthful where it can be checked
    through the surface: declared history, prime, erase reporting and kept media."""
    doc = _provider(api)
    for key in ("id", "isolation", "derivation", "observe", "recall", "history", "revise",
                "forget", "erase", "prime", "consolidate", "queries", "types", "graph",
                "content"):
        assert key in doc, key
    assert doc["isolation"] in ("container", "enforced_filter")
    assert set(doc["recall"]["signals"]) <= {"query", "text", "filters"}
    assert doc["erase"]["unreachable"] == "reported"
    mid = _memory(api, "Declared")["id"]
    if doc["queries"].get("free") in (None, False):
        bad = api.post(f"/v1/memories/{mid}/query", json={"language": "cypher",
                                                          "statement": "MATCH (n) RETURN n"})
        err(bad, 422, "memory_unsupported")
    types = ok(api.get("/v1/memories/types"))["data"]
    core = {t["type"] for t in types if t.get("core")}
    assert {"episode", "fact", "note", "procedure", "link", "entity"} <= core


def test_me09_content_parts(api: httpx.Client) -> None:
    """ME-09 (public, post1): content parts keep their order; an ``x.`` part is carried
    unchanged; a file part is kept with its description and read back byte for byte; a media
    type the provider does not keep is refused with ``memory_unsupported``."""
    mid = _memory(api, "Parts")["id"]
    media = _provider(api)["content"]["media"]
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    assert any(m in ("image/*", "image/png") for m in media)
    uploaded = ok(api.post("/v1/files", params={"name": "chart.png"}, content=png,
                           headers={"content-type": "image/png"}))
    assert uploaded["bytes"] == len(png) and uploaded["media_type"] == "image/png"
    parts = [
        {"type": "text", "text": "Before the chart", "role": "user"},
        {"type": "file", "file": {"id": uploaded["id"]}, "text": "A bar chart of Q3 revenue",
         "text_source": "stated"},
        {"type": "x.acme.widget", "payload": {"k": [1, 2, {"z": None}]}},
        {"type": "text", "text": "After the chart"},
    ]
    record = _remember(api, mid, {"type": "note", "content": parts})
    got = record["content"]
    assert [p["type"] for p in got] == ["text", "file", "x.acme.widget", "text"]
    assert got[2] == parts[2]
    assert got[1]["file"]["id"] == uploaded["id"] and got[1]["file"]["name"] == "chart.png"
    assert got[1]["file"]["media_type"] == "image/png" and got[1]["file"]["bytes"] == len(png)
    assert got[1]["text"] == "A bar chart of Q3 revenue"
    raw = api.get(f"/v1/memories/{mid}/records/{record['id']}/content/1")
    assert raw.status_code == 200 and raw.content == png
    assert raw.headers["x-content-type-options"] == "nosniff"
    assert raw.headers["content-disposition"].startswith("attachment")
    err(api.get(f"/v1/memories/{mid}/records/{record['id']}/content/0"), 404,
        "memory_record_not_found")
    err(api.get(f"/v1/memories/{mid}/records/{record['id']}/content/9"), 404,
        "memory_record_not_found")
    found = ok(api.post(f"/v1/memories/{mid}/recall", json={"text": "bar chart revenue"}))
    assert [r["record"]["id"] for r in found["results"]] == [record["id"]]
    refused = api.post("/v1/files", params={"name": "tool.exe"}, content=b"MZ\x90\x00",
                       headers={"content-type": "application/x-msdownload"})
    err(refused, 422, "memory_unsupported")
    err(api.post(f"/v1/memories/{mid}/records", json={"content": [{"type": "video"}]}), 422,
        "memory_invalid")


def test_me08_move_and_delete(api: httpx.Client) -> None:
    """ME-08 (public): moving re-parents a memory (ancestors follow), a cycle is refused, and
    deleting removes the memory, its records and every descendant."""
    a = _memory(api, "MoveA")
    b = _memory(api, "MoveB")
    c = _memory(api, "MoveC", b["id"])
    _remember(api, c["id"], {"content": "inside C"})
    moved = ok(api.put(f"/v1/memories/{b['id']}", json={"parent_id": a["id"]}))
    assert moved["parent_id"] == a["id"] and moved["ancestors"] == [a["id"]]
    assert ok(api.get(f"/v1/memories/{c['id']}"))["ancestors"] == [a["id"], b["id"]]
    err(api.put(f"/v1/memories/{a['id']}", json={"parent_id": c["id"]}), 422, "memory_invalid")
    err(api.put(f"/v1/memories/{a['id']}", json={"parent_id": a["id"]}), 422, "memory_invalid")
    deleted = ok(api.delete(f"/v1/memories/{b['id']}"))
    assert deleted["deleted"] is True and set(deleted["memories"]) == {b["id"], c["id"]}
    for gone in (b["id"], c["id"]):
        err(api.get(f"/v1/memories/{gone}"), 404, "memory_not_found")
    assert ok(api.get(f"/v1/memories/{a['id']}"))["children"]["count"] == 0


def test_me10_graph_two_entities_and_a_fact(api: httpx.Client) -> None:
    """ME-10 (ours): two entities and the fact between them read back as one graph; a second
    subject is refused."""
    mid = _memory(api, "Graph")["id"]
    acme = _remember(api, mid, {"type": "entity", "title": "Acme", "content": ""})
    dana = _remember(api, mid, {"type": "entity", "title": "Dana", "content": ""})
    fact = _remember(api, mid, {"type": "fact", "content": "Dana is Acme's buyer", "references": [
        {"rel": "subject", "memory_id": mid, "record_id": dana["id"]},
        {"rel": "object", "memory_id": mid, "record_id": acme["id"]}]})
    graph = ok(api.post(f"/v1/memories/{mid}/graph", json={"around": fact["id"], "hops": 1}))
    assert graph["object"] == "memory.graph"
    nodes = {n["record"]["id"] for n in graph["nodes"]}
    assert nodes == {acme["id"], dana["id"], fact["id"]}
    edges = {(e["from"]["record_id"], e["rel"], e["to"]["record_id"]) for e in graph["edges"]}
    assert edges == {(fact["id"], "subject", dana["id"]), (fact["id"], "object", acme["id"])}
    assert all(e["available"] is True for e in graph["edges"])
    second = api.post(f"/v1/memories/{mid}/records", json={"type": "fact", "content": "x",
                      "references": [
                          {"rel": "subject", "memory_id": mid, "record_id": dana["id"]},
                          {"rel": "subject", "memory_id": mid, "record_id": acme["id"]}]})
    err(second, 422, "memory_invalid")
    err(api.post(f"/v1/memories/{mid}/graph", json={"hops": 4}), 422, "memory_invalid")


def test_me12_prime_standing_records(api: httpx.Client) -> None:
    """ME-12 (ours; the requirements' prime route): ``GET /v1/memories/{id}/prime?budget=N``
    returns the active standing records within the token budget, nothing else."""
    mid = _memory(api, "Prime")["id"]
    standing = _remember(api, mid, {"type": "procedure", "content": "Always answer in English.",
                                    "attributes": {"standing": True}})
    _remember(api, mid, {"type": "fact", "content": "Ordinary fact, not standing."})
    dropped = _remember(api, mid, {"type": "note", "content": "Old standing rule.",
                                   "attributes": {"standing": True}})
    ok(api.delete(f"/v1/memories/{mid}/records/{dropped['id']}"))
    primed = ok(api.get(f"/v1/memories/{mid}/prime", params={"budget": 4000}))
    assert primed["memory_id"] == mid
    assert "Always answer in English." in primed["text"]
    assert "Ordinary fact" not in primed["text"] and "Old standing rule" not in primed["text"]
    assert 0 < primed["tokens"] <= 4000
    assert primed["records"] == [standing["id"]]
    tiny = ok(api.get(f"/v1/memories/{mid}/prime", params={"budget": 1}))
    assert tiny["tokens"] <= 1
    err(api.get(f"/v1/memories/{mid}/prime", params={"budget": 0}), 422, "memory_invalid")
    err(api.get("/v1/memories/no-such-memory/prime"), 404, "memory_not_found")


def test_me13_as_of_and_snapshots(api: httpx.Client) -> None:
    """ME-13 (ours): ``as_of`` reads a record as it stood at an instant, and a snapshot names
    an instant without copying anything."""
    mid = _memory(api, "AsOf")["id"]
    first = _remember(api, mid, {"content": "price is 10"})
    snap = ok(api.post(f"/v1/memories/{mid}/snapshots", json={"name": "before-change"}))
    assert snap["object"] == "memory.snapshot" and snap["memory_id"] == mid
    ok(api.patch(f"/v1/memories/{mid}/records/{first['id']}", json={"content": "price is 12"}))
    then = ok(api.get(f"/v1/memories/{mid}/records/{first['id']}",
                      params={"as_of": first["time"]["written_at"]}))
    assert then["version"] == 1 and then["content"][0]["text"] == "price is 10"
    now = ok(api.get(f"/v1/memories/{mid}/records/{first['id']}"))
    assert now["version"] == 2
    snaps = ok(api.get(f"/v1/memories/{mid}/snapshots"))["data"]
    assert [s["id"] for s in snaps] == [snap["id"]]
