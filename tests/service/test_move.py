"""``pal admin migrate --to postgresql://…``: an embedded store with a bit of everything moves
into an empty PostgreSQL database; its projections re-derived there equal the embedded ones
digest for digest, and the moved store answers as the old one did — credentials, sessions,
records with their history, recall, files, a pending review, stored responses, signatures.
A target that already holds a store is refused and left as it was.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from palimpsest.service import MemoryService
from palimpsest.service.grouped import RememberCall
from palimpsest.service.memorygit.reviewed import ReviewedWrites
from palimpsest.service.memorygit.wiring import open_flow
from tests.api.server import pal_command
from tests.conftest import Backend
from tests.service.conftest import FakeClock, member

pytestmark = pytest.mark.postgres
BACKENDS = ("postgresql",)  # the source is always the embedded store
ORDERED = ("harbour lantern", "thunder falcon", "orchard")
# Twelve notes of exactly equal BM25: among them recall's order follows their row numbers,
# which a re-derivation renumbers (an erased record's row is reused by SQLite, not by
# PostgreSQL's sequence) — the same records must come back, in an order of their own.
TIED = "marble saddle"


def _fill(data: Path) -> dict[str, Any]:
    """A store with members, a group, a tree, grants, records (revised, forgotten, erased),
    a file, a snapshot, a session, a pending review and a stored response."""
    clock = FakeClock()
    with MemoryService(data, clock=clock) as svc:
        made = svc.bootstrap_owner("owner")
        assert made is not None
        owner = svc.caller(made[0].id)
        agent = member(svc, "agent-1")
        group = svc.create_group("team")
        svc.add_membership(group.id, agent.member.id)
        root = svc.create_memory(owner, {"name": "root"})["id"]
        child = svc.create_memory(owner, {"name": "child", "parent_id": root})["id"]
        svc.put_grant(owner, child, {"principal": f"group:{group.id}",
                                     "privileges": ["read"]})
        for mid in (root, child):
            svc.put_grant(owner, mid, {"principal": f"member:{agent.member.id}",
                                       "privileges": ["read", "write"]})
        first = svc.remember(owner, root, {"content": "the harbour lantern is copper"},
                             idempotency_key="k1")
        svc.revise(owner, root, first["id"], {"content": "the harbour lantern is brass"})
        gone = svc.remember(owner, root, {"content": "forget the violet orchard"})
        svc.forget(owner, root, gone["id"])
        secret = svc.remember(owner, child, {"content": "erase the glacier pepper"})
        svc.erase(owner, child, {"record_ids": [secret["id"]]})
        for i in range(12):
            clock.tick()
            svc.remember(agent, child, {"content": f"agent note {i} about the marble saddle"})
        svc.observe(owner, child, {"episodes": [{"content": "we talked about thunder quartz"},
                                                {"content": "and the meadow falcon"}]})
        f = svc.upload_file(owner, b"file bytes here", name="a.txt", media_type="text/plain")
        svc.remember(owner, root, {"content": [{"type": "text", "text": "see the file"},
                                               {"type": "file", "file": {"id": f["id"]}}]})
        svc.create_snapshot(owner, root, {"name": "before"})
        ReviewedWrites(open_flow(svc)).put_settings(f"member:{owner.member.id}", root,
                                                    {"review_required": True})
        pending = svc.remember_many([RememberCall(agent, root, {"content": "proposed"}, "a1")])
        _, token = svc.issue_credential(agent.member.id, "laptop")
        sid, _, _ = svc.open_session(token, idle_seconds=3600, max_seconds=86400)
        answers = {q: [r["record"]["id"] for r in svc.recall(owner, root, {
            "query": q, "limit": 20})["results"]] for q in (*ORDERED, TIED)}
        changesets = svc.list_changesets(owner, root)["data"]
        signed = {c["changeset_id"]: svc.changeset_signatures(owner, root, c["changeset_id"])
                  for c in changesets}
        return {"signed": signed, "owner": owner.member.id, "agent": agent.member.id, "root": root,
                "child": child, "first": first, "token": token, "sid": sid,
                "answers": answers, "pending": pending[0],
                "changesets": svc.list_changesets(owner, root)["data"],
                "records": svc.list_records(owner, child)["data"]}


def _migrate(data: Path, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(pal_command("admin", "--data-dir", str(data), "--json", "migrate",
                                      "--to", url),
                          capture_output=True, text=True, timeout=300, check=False)


def test_a_store_moves_to_postgresql_and_answers_as_before(backend: Backend,
                                                           tmp_path: Path) -> None:
    assert backend.database_url is not None
    data = tmp_path / "data"
    was = _fill(data)
    run = _migrate(data, backend.database_url)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["equal"] is True and report["digest_source"] == report["digest_target"]
    assert report["copied"]["changesets"] >= 20 and report["copied"]["signatures"] >= 20
    later = FakeClock(1_790_000_100_000)  # a minute after the writes: the session is live
    with MemoryService(data, database=backend.database_url, clock=later) as svc:
        owner = svc.caller(was["owner"])
        assert svc.authenticate(was["token"]).member.id == was["agent"]
        assert svc.resume_session(was["sid"], idle_seconds=3600) is not None
        assert svc.list_changesets(owner, was["root"])["data"] == was["changesets"]
        assert svc.list_records(owner, was["child"])["data"] == was["records"]
        history = svc.record_history(owner, was["root"], was["first"]["id"])
        assert [v["version"] for v in history["data"]] == [1, 2]
        for q, ids in was["answers"].items():
            found = [r["record"]["id"] for r in svc.recall(
                owner, was["root"], {"query": q, "limit": 20})["results"]]
            assert (found if q in ORDERED else set(found)) == (
                ids if q in ORDERED else set(ids)), q
        assert svc.remember(owner, was["root"], {"content": "the harbour lantern is copper"},
                            idempotency_key="k1") == was["first"]  # the stored answer
        for cid, signed in was["signed"].items():  # every signature kept, byte for byte
            assert svc.changeset_signatures(owner, was["root"], cid) == signed
        assert any(s["signatures"] for s in was["signed"].values())
        assert svc.rebuild()["equal"] is True
        proposals = svc.list_proposals(owner, was["root"])
        assert [p["status"] for p in proposals] == ["open"]


def test_a_target_that_holds_a_store_is_refused_and_left_alone(backend: Backend,
                                                               tmp_path: Path) -> None:
    assert backend.database_url is not None
    with MemoryService(tmp_path / "other", database=backend.database_url) as other:
        assert other.bootstrap_owner("someone else") is not None
    with psycopg.connect(backend.database_url) as conn:
        before = conn.execute("SELECT id FROM members").fetchall()
    _fill(tmp_path / "data")
    run = _migrate(tmp_path / "data", backend.database_url)
    assert run.returncode != 0 and "already holds a store" in run.stderr
    assert "new, empty database" in run.stderr  # says what to do
    with psycopg.connect(backend.database_url) as conn:
        assert conn.execute("SELECT id FROM members").fetchall() == before
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
