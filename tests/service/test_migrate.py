"""``pal admin migrate`` on a data directory written by the store of schema 1 (the fixture
``tests/vectors/service/schema1.sql`` was made by the previous version: direct writes, a
revision, a forget, an erase, a snapshot, and a reviewed Memory Git merge)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from palimpsest.errors import Conflict, InvalidInput, Unavailable
from palimpsest.service.memories import MemoryService
from palimpsest.service.upgrade import KEPT, migrate

FIXTURE = Path(__file__).resolve().parents[1] / "vectors" / "service" / "schema1.sql"


@pytest.fixture
def old_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    db = sqlite3.connect(data / "palimpsest.db")
    db.executescript(FIXTURE.read_text(encoding="utf-8"))
    db.close()
    return data


def test_an_old_store_is_refused_then_migrated_into_one_history(old_dir: Path) -> None:
    with pytest.raises(Unavailable):
        MemoryService(old_dir)
    report = migrate(old_dir)
    assert report["from_schema"] == 1 and report["to_schema"] == 2
    assert report["changesets"] == 7
    assert (old_dir / KEPT).exists()
    with MemoryService(old_dir) as svc:
        alice = svc.caller(next(m.id for m in svc.list_members() if m.name == "alice"))
        mid = svc.list_memories(alice)["data"][0]["id"]
        records = svc.list_records(alice, mid, include="all")["data"]
        assert sorted((r["content"][0]["text"], r["status"], r["version"]) for r in records) == [
            ("Retro on Fridays", "active", 1), ("Standup at 10:15", "active", 2),
            ("to forget", "forgotten", 1)]
        assert svc.rebuild()["equal"] is True
        # every changeset verifies under its new id; refs and snapshots name the new ids
        log = svc.list_changesets(alice, mid)["data"]
        head = svc.list_refs(alice, mid)["data"][0]["head_changeset_id"]
        assert log[0]["changeset_id"] == head
        snapshot = svc.list_snapshots(alice, mid)["data"][0]
        assert snapshot["head"] in {c["changeset_id"] for c in log}
        # a UHP write made before the migration still replays to its first answer
        again = svc.remember(alice, mid, {"type": "fact", "content": "Standup at 10"},
                             idempotency_key="r1")
        assert again["content"][0]["text"] == "Standup at 10" and again["version"] == 1
        # the merged proposal, its review and the advance name the rewritten history
        from palimpsest.service.memorygit.wiring import open_flow

        flow = open_flow(svc)
        a = f"member:{alice.member.id}"
        proposal = flow.list_proposals(a, mid)[0]
        assert proposal["status"] == "merged"
        full = flow.get_proposal(a, proposal["proposal_id"])
        assert full["reviews"][0]["proposal_digest"] == full["proposal_digest"]
        assert flow.git.load(full["head_changeset_id"]).id == full["head_changeset_id"]


def test_a_second_migration_is_refused(old_dir: Path) -> None:
    migrate(old_dir)
    with pytest.raises(Conflict) as err:
        migrate(old_dir)
    assert err.value.code == "migration_started"


def test_a_current_store_or_no_store_is_left_alone(tmp_path: Path) -> None:
    current = tmp_path / "current"
    MemoryService(current).close()
    before = (current / "palimpsest.db").read_bytes()
    with pytest.raises(Unavailable) as err:
        migrate(current)
    assert "not a store of schema 1" in err.value.message
    assert (current / "palimpsest.db").read_bytes() == before
    assert sorted(p.name for p in current.iterdir()) == ["files", "palimpsest.db"]
    with pytest.raises(InvalidInput):
        migrate(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


def test_the_cli_migrates(old_dir: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "palimpsest.cli.main", "admin", "--data-dir",
                          str(old_dir), "migrate", "--json"], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert '"to_schema": 2' in out.stdout
