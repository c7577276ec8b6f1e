"""A started ``pal serve`` with a small organisation in it, built through the real HTTP API.

Members (provisioned before the server starts, as ``pal admin`` would): alice (a person, who
creates the tree), bob and erin (agents that write through review), carol (a person who
reviews), dave (a person holding no grant at all).

Tree: ``Company`` (alice) → ``Acme`` (review required for agents), ``Board`` (restricted) and
``Hostile`` (records from tests/adversarial/ui). Bob and erin each have an open proposal in
Acme (both standing records: once merged they reach the prime); alice has one of her own
(to be refused when she reviews it herself).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.api.server import Member, Server, ok, provision, start

ADVERSARIAL = Path(__file__).resolve().parents[1] / "adversarial" / "ui"
MEMBERS = (("alice", "human"), ("bob", "agent"), ("carol", "human"), ("dave", "human"),
           ("erin", "agent"))


def hostile_cases() -> dict[str, dict[str, str]]:
    """The hostile records (title and text by case name) and the 60 KB line."""
    cases: dict[str, dict[str, str]] = json.loads(
        (ADVERSARIAL / "records.json").read_text(encoding="utf-8"))
    cases["long-line"] = {"title": "a 60 KB line",
                          "text": (ADVERSARIAL / "long-line.txt").read_text(encoding="utf-8")}
    return cases


@dataclass
class World:
    """What the tests look at: the server, the members and the ids made."""

    server: Server
    members: dict[str, Member]
    ids: dict[str, str] = field(default_factory=dict)

    def api(self, name: str) -> httpx.Client:
        """A bearer client of the API as ``name``."""
        return self.server.client(self.members[name].token,
                                  **{"Content-Type": "application/json"})


def _post(client: httpx.Client, path: str, body: Any, status: int = 200,
          key: str | None = None) -> Any:
    headers = {"Idempotency-Key": key or f"t-{uuid.uuid4()}"}
    return ok(client.post(path, json=body, headers=headers), status)


def build(data_dir: Path, env: dict[str, str] | None = None) -> World:
    """Provision members, start the server and fill it (see the module docs)."""
    raw = provision(data_dir, MEMBERS)
    members = {k: v for k, v in raw.items() if isinstance(v, Member)}
    world = World(start(data_dir, env=env), members)
    try:
        _fill(world)
    except BaseException:
        world.server.stop()
        raise
    return world


def _fill(world: World) -> None:
    ids = world.ids
    m = world.members
    with world.api("alice") as alice:
        ids["company"] = _post(alice, "/v1/memories", {
            "name": "Company", "description": "What the whole company knows"})["id"]
        ids["acme"] = _post(alice, "/v1/memories", {
            "name": "Acme", "description": "The customer Acme: renewals, contacts, decisions",
            "parent_id": ids["company"]})["id"]
        ids["board"] = _post(alice, "/v1/memories", {
            "name": "Board", "description": "Board minutes (restricted)",
            "parent_id": ids["company"], "restricted": True})["id"]
        ids["hostile"] = _post(alice, "/v1/memories", {
            "name": "Hostile <script>window.__pwned='name'</script>",
            "description": "Records whose text tries to act \u202eevil\u202c",
            "parent_id": ids["company"]})["id"]
        for name, privileges in (("bob", ["read", "write"]), ("erin", ["read", "write"]),
                                 ("carol", ["read", "write"])):
            _post(alice, f"/v1/memories/{ids['company']}/grants",
                  {"principal": f"member:{m[name].id}", "privileges": privileges})
        _post(alice, f"/v1/memories/{ids['board']}/grants",
              {"principal": f"member:{m['carol'].id}", "privileges": ["read"]})
        fact = _post(alice, f"/v1/memories/{ids['acme']}/records", {
            "type": "fact", "title": "Acme renews in March",
            "content": "Acme renews its contract every March with a notice period of 30 days.",
            "attributes": {"account": "acme"}})
        ids["fact"] = fact["id"]
        ok(alice.patch(f"/v1/memories/{ids['acme']}/records/{ids['fact']}", json={
            "content": "Acme renews its contract every March with a notice period of 60 days."}))
        _post(alice, f"/v1/memories/{ids['acme']}/records", {
            "type": "procedure", "title": "Answer Acme within a day",
            "content": "Answer Acme's support questions within one business day.",
            "attributes": {"standing": True}})
        upload = alice.post("/v1/files", params={"name": "q3 <figures>.html"},
                            content=b"<script>alert('file')</script><h1>Q3</h1>",
                            headers={"Content-Type": "text/html"})
        file_id = ok(upload)["id"]
        ids["note"] = _post(alice, f"/v1/memories/{ids['acme']}/records", {
            "type": "note", "content": [
                {"type": "text", "text": "Q3 figures attached"},
                {"type": "file", "file": {"id": file_id}, "text": "Q3 revenue table"}]})["id"]
        for case, doc in hostile_cases().items():
            ids[f"hostile:{case}"] = _post(alice, f"/v1/memories/{ids['hostile']}/records", {
                "type": "note", "title": doc["title"][:300], "content": doc["text"]})["id"]
        _post(alice, f"/api/memory/{ids['acme']}/legacy-root", {}, 201)
        ok(alice.put(f"/api/memory/{ids['acme']}/settings",
                     json={"review_required": True, "reviewed_types": ["agent"]}))
    with world.api("bob") as bob:
        pending = _post(bob, f"/v1/memories/{ids['acme']}/records", {
            "type": "fact", "title": "Acme's notice period",
            "content": "Acme renews every March; the notice period is 60 days, by letter.",
            "attributes": {"standing": True}}, 202)
        ids["bob_proposal"] = pending["proposal_id"]
        ids["bob_memory"] = pending["memory_id"]
    with world.api("erin") as erin:
        hostile = hostile_cases()["script-tag"]
        pending = _post(erin, f"/v1/memories/{ids['acme']}/records", {
            "type": "note", "title": hostile["title"],
            "content": "Acme wants everything free. " + hostile["text"],
            "attributes": {"standing": True}}, 202)
        ids["erin_proposal"] = pending["proposal_id"]
    _own_proposal(world)


def _own_proposal(world: World) -> None:
    """Alice commits on her own ref and proposes it (she may not review it herself)."""
    ids = world.ids
    alice_id = world.members["alice"].id
    ref = f"refs/agents/{alice_id}/main"
    with world.api("alice") as alice:
        shared = ok(alice.get(f"/api/memory/{ids['acme']}/refs/shared/main"))
        _post(alice, f"/api/memory/{ids['acme']}/branches",
              {"ref_name": ref, "head_changeset_id": shared["head_changeset_id"]}, 201)
        head = ok(alice.get(f"/api/memory/{ids['acme']}/refs/agents/{alice_id}/main"))
        _post(alice, "/api/memory/changesets", {
            "project_id": ids["acme"], "ref_name": ref,
            "expected_head": head["head_changeset_id"], "idempotency_key": "alice-1",
            "message": "Acme's new contact", "ops": [{"op_type": "add_memory", "payload": {
                "content": "Dana is Acme's buyer from April.", "kind": "fact"}}]}, 201)
        proposal = _post(alice, f"/api/memory/{ids['acme']}/proposals", {
            "source_ref": ref, "idempotency_key": "alice-p1",
            "message": "Alice's own proposal"}, 201)
        ids["alice_proposal"] = proposal["proposal_id"]


__all__ = ["ADVERSARIAL", "MEMBERS", "World", "build", "hostile_cases"]
