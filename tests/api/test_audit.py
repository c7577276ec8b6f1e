"""The audit log over real HTTP (``pal serve``): a write, refused writes (forbidden, invalid,
conflict), a refused read, a bad credential and a self-review attempt are each one entry with
its reason code, read back with ``pal admin audit`` and its filters — and no byte of what was
written or asked is in the audit table."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.server import Server, err, ok, pal_command, provision, start

SECRET = "zebra-quokka-7731 the launch code"  # content that must never reach the audit log
OTHER = "marmoset-1188 another body"
QUERY = "quokka-recall-query-5521"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data_dir: Path = tmp_path_factory.mktemp("audit") / "data"
    members = provision(data_dir, (("alice", "human"), ("bob", "agent"), ("carol", "agent")))
    server = start(data_dir, env={"PAL_MERGE_HMAC_KEYS": "k=" + "k" * 40})
    try:
        yield {"server": server, "members": members, "data_dir": data_dir}
    finally:
        server.stop()


def audit(data_dir: Path, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run(pal_command("admin", "--data-dir", str(data_dir), "audit", "--json",
                                      *args), capture_output=True, text=True, check=True)
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def _requests(server: Server, members: dict[str, Any]) -> dict[str, Any]:
    alice = server.client(members["alice"].token, **{"X-Request-Id": "req-alice-1"})
    bob = server.client(members["bob"].token)
    carol = server.client(members["carol"].token)
    memory = ok(alice.post("/v1/memories", json={"name": "Audited"}))["id"]
    ok(alice.post(f"/v1/memories/{memory}/grants", json={
        "principal": f"member:{members['bob'].id}", "privileges": ["read"]}))
    ok(alice.post(f"/v1/memories/{memory}/records", json={"content": SECRET},
                  headers={"Idempotency-Key": "k-1"}))
    # refused writes: forbidden (read-only grant), invalid body, conflict (reused key)
    err(bob.post(f"/v1/memories/{memory}/records", json={"content": OTHER}), 403,
        "memory_forbidden")
    err(alice.post(f"/v1/memories/{memory}/records", json={"content": 5, "title": SECRET}),
        422, "memory_invalid")
    err(alice.post(f"/v1/memories/{memory}/records", json={"content": OTHER},
                   headers={"Idempotency-Key": "k-1"}), 409, "x.pal.idempotency_mismatch")
    # a refused read: carol holds no grant, so the memory does not exist for her
    err(carol.post(f"/v1/memories/{memory}/recall", json={"query": QUERY}), 404,
        "memory_not_found")
    ok(bob.post(f"/v1/memories/{memory}/recall", json={"query": QUERY}))  # a read: not audited
    # a credential that names an id but is no secret
    forged = server.client("pal_hcred_forged_" + "x" * 40)
    assert forged.get(f"/v1/memories/{memory}").status_code == 401
    # a self-review attempt through Memory Git
    ok(alice.post(f"/api/memory/{memory}/legacy-root", json={}), 201)
    root = ok(alice.get(f"/api/memory/{memory}/refs/shared/main"))["head_changeset_id"]
    mine = f"refs/agents/{members['alice'].id}/main"
    ok(alice.post(f"/api/memory/{memory}/branches",
                  json={"ref_name": mine, "head_changeset_id": root}), 201)
    ok(alice.post("/api/memory/changesets", json={
        "project_id": memory, "ref_name": mine, "expected_head": root, "idempotency_key": "c1",
        "message": "m", "ops": [{"ordinal": 0, "op_type": "add_memory",
                                 "payload": {"content": SECRET, "kind": "fact"}}]}), 201)
    prop = ok(alice.post(f"/api/memory/{memory}/proposals",
                         json={"source_ref": mine, "idempotency_key": "p1"}), 201)
    denied = alice.post(f"/api/memory/proposals/{prop['proposal_id']}/reviews",
                        json={"verdict": "approve", "comment": SECRET})
    assert denied.status_code == 403 and denied.json()["error"] == "self-review"
    return {"memory": memory, "proposal": prop["proposal_id"]}


def test_writes_and_refusals_are_audited_without_content(world: dict[str, Any]) -> None:
    members, data_dir = world["members"], world["data_dir"]
    made = _requests(world["server"], members)
    memory = made["memory"]
    rows = audit(data_dir, "--limit", "1000")
    by = {(r["action"], r["outcome"], r["reason"], r["member_id"]) for r in rows}
    alice, bob, carol = (members[n].id for n in ("alice", "bob", "carol"))
    records = "POST /v1/memories/{memory_id}/records"
    assert (records, "ok", None, alice) in by
    assert (records, "refused", "memory_forbidden", bob) in by
    assert (records, "refused", "memory_invalid", alice) in by
    assert (records, "refused", "x.pal.idempotency_mismatch", alice) in by
    assert ("POST /v1/memories/{memory_id}/recall", "refused", "memory_not_found", carol) in by
    assert ("POST /api/memory/proposals/{proposal_id}/reviews", "refused", "self-review",
            alice) in by
    assert not any(r["action"].endswith("/recall") and r["member_id"] == bob for r in rows)
    forged = [r for r in rows if r["reason"] == "invalid_credential"]
    assert [(f["status"], f["member_id"], f["credential_id"]) for f in forged] == [
        (401, None, "hcred_forged")]
    first = next(r for r in rows if r["action"] == records and r["outcome"] == "ok")
    assert first["request_id"] == "req-alice-1" and first["memory_id"] == memory
    assert first["credential_id"].startswith("hcred_") and first["status"] == 200
    # filters: member, memory, outcome, time
    assert {r["member_id"] for r in audit(data_dir, "--member", bob)} == {bob}
    assert {r["memory_id"] for r in audit(data_dir, "--memory", memory)} == {memory}
    refused = audit(data_dir, "--outcome", "refused", "--member", alice)
    assert {r["reason"] for r in refused} == {"memory_invalid", "x.pal.idempotency_mismatch",
                                              "self-review"}
    assert audit(data_dir, "--since", "1h") == audit(data_dir)
    assert audit(data_dir, "--until", "1h") == []
    # never a byte of content: not in any column of any row
    with sqlite3.connect(data_dir / "palimpsest.db") as db:
        cells = [str(c) for row in db.execute("SELECT * FROM audit") for c in row]
        assert len(cells) >= 11 * len(rows) > 0
        for needle in (SECRET, OTHER, QUERY, "zebra", "quokka", "marmoset"):
            assert not any(needle in c for c in cells), needle
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute("UPDATE audit SET outcome='ok'")


def test_retention_prunes_by_age(world: dict[str, Any]) -> None:
    data_dir = world["data_dir"]
    before = len(audit(data_dir, "--limit", "10000"))
    assert before > 0
    with sqlite3.connect(data_dir / "palimpsest.db") as db:  # age one entry by hand
        db.execute("INSERT INTO audit (at, surface, action, outcome) VALUES (1, 'http', 'x', 'ok')")
    done = subprocess.run(pal_command("admin", "--data-dir", str(data_dir), "--json",
                                      "audit-prune", "30"),
                          capture_output=True, text=True, check=True)
    assert json.loads(done.stdout)["removed"] == 1
    assert len(audit(data_dir, "--limit", "10000")) == before


def test_a_backup_carries_the_audit_log(world: dict[str, Any], tmp_path: Path) -> None:
    data_dir = world["data_dir"]
    live = audit(data_dir, "--limit", "10000")
    assert live
    subprocess.run(pal_command("admin", "--data-dir", str(data_dir), "backup",
                               str(tmp_path / "copy")), capture_output=True, check=True)
    assert audit(tmp_path / "copy", "--limit", "10000") == live
