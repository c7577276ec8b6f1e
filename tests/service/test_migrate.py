"""``pal admin migrate`` on data directories written by the stores of schema 1 and 2 (the
fixtures ``tests/vectors/service/schema1.sql`` and ``schema2.sql`` were made by those versions:
direct writes, a revision, a forget, an erase, a snapshot, a reviewed Memory Git merge; schema 2
also episodes, a second memory, keyed writes and a proposal still open)."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from palimpsest.errors import Conflict, InvalidInput, Unavailable
from palimpsest.service.memories import MemoryService
from palimpsest.service.upgrade import kept_name, migrate
from tests.stored import grep_data_dir

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "service"


def load_fixture(tmp_path: Path, name: str) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    db = sqlite3.connect(data / "palimpsest.db")
    db.executescript((VECTORS / name).read_text(encoding="utf-8"))
    db.close()
    return data


@pytest.fixture
def old_dir(tmp_path: Path) -> Path:
    return load_fixture(tmp_path, "schema1.sql")


@pytest.fixture
def schema2_dir(tmp_path: Path) -> Path:
    return load_fixture(tmp_path, "schema2.sql")


def test_an_old_store_is_refused_then_migrated_into_one_history(old_dir: Path) -> None:
    with pytest.raises(Unavailable):
        MemoryService(old_dir)
    report = migrate(old_dir)
    assert report["from_schema"] == 1 and report["to_schema"] == 3
    assert report["changesets"] == 7
    assert (old_dir / kept_name(1)).exists()
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


SHARED_HEAD = "d641ca8a25a85addb85f7d08f433f827af81a68bcde0a6c321171d904b18e38b"  # in schema2.sql


def test_a_store_of_schema_2_migrates_with_every_id_kept(schema2_dir: Path) -> None:
    with pytest.raises(Unavailable) as refused:
        MemoryService(schema2_dir)
    assert "pal admin --data-dir" in (refused.value.hint or "")
    report = migrate(schema2_dir)
    assert (report["from_schema"], report["to_schema"], report["changesets"]) == (2, 3, 12)
    assert (schema2_dir / kept_name(2)).exists()
    with MemoryService(schema2_dir) as svc:
        alice = svc.caller(next(m.id for m in svc.list_members() if m.name == "alice"))
        mid = svc.list_memories(alice)["data"][0]["id"]
        records = svc.list_records(alice, mid, include="all")["data"]
        assert sorted((r["content"][0]["text"], r["status"], r["version"]) for r in records) == [
            ("Bins go out Tuesday", "forgotten", 1), ("Bins go out Wednesday", "active", 1),
            ("It is at ten fifteen", "active", 1), ("Retro on Fridays", "active", 3),
            ("Standup at 10:15", "forgotten", 2), ("Standup at 9:30", "active", 1),
            ("What time is standup?", "active", 1), ("to forget", "forgotten", 1)]
        assert svc.rebuild()["equal"] is True
        # the history is the same history: the same ids, verified on read
        log = svc.list_changesets(alice, mid)["data"]
        assert log[0]["changeset_id"] == SHARED_HEAD
        # keyed writes made before the migration replay to their first answers
        again = svc.remember(alice, mid, {"type": "fact", "content": "Standup at 10"},
                             idempotency_key="r1")
        assert again["content"][0]["text"] == "Standup at 10" and again["version"] == 1
        from palimpsest.service.memorygit.wiring import open_flow

        flow = open_flow(svc)
        a = f"member:{alice.member.id}"
        assert sorted(p["status"] for p in flow.list_proposals(a, mid)) == ["merged", "open"]
        found = svc.recall(alice, mid, {"text": "retro fridays"})["results"]
        assert found and found[0]["record"]["id"] == "retro"
        # the words erased before the migration are nowhere, old file included
        assert grep_data_dir(schema2_dir, "Zyxwquartz") == []


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
    assert "not a store of schema 1 or 2" in err.value.message
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
    assert '"to_schema": 3' in out.stdout


# The sessions table as the store of schema 2 writes it since the review desk kept its sign-ins
# in the store (commit d7aa733); the fixture above predates it.
SESSIONS_DDL = """CREATE TABLE IF NOT EXISTS sessions (key TEXT PRIMARY KEY,
  member_id TEXT NOT NULL, credential_id TEXT NOT NULL, csrf TEXT NOT NULL,
  created_at INTEGER NOT NULL, idle_until INTEGER NOT NULL, expires_at INTEGER NOT NULL)
  WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_member ON sessions(member_id, created_at);"""
DAY_MS = 86_400_000


def _signed_in_before(data: Path, session_id: str) -> None:
    """A desk session of alice's, opened with her credential, as a schema-2 store holds it."""
    db = sqlite3.connect(data / "palimpsest.db")
    try:
        db.executescript(SESSIONS_DDL)
        member, = db.execute("SELECT id FROM members WHERE name='alice'").fetchone()
        cred = db.execute("SELECT id FROM credentials WHERE member_id=?", (member,)).fetchone()
        if cred is None:  # the fixture gave alice no credential: one as pal admin mints it
            cred = ("hcred_migrated",)
            db.execute("INSERT INTO credentials VALUES (?,?,?,?,?,0)",
                       (cred[0], member, "0" * 64, "desk", 0))
        now = int(time.time() * 1000)
        db.execute("INSERT INTO sessions VALUES (?,?,?,?,?,?,?)",
                   (hashlib.sha256(session_id.encode("ascii")).hexdigest(), member, cred[0],
                    "csrf-token", now, now + DAY_MS, now + DAY_MS))
        db.commit()
    finally:
        db.close()


def test_desk_sessions_survive_a_migration_from_schema_2(schema2_dir: Path) -> None:
    sid = "s" * 43
    _signed_in_before(schema2_dir, sid)
    migrate(schema2_dir)
    with MemoryService(schema2_dir) as svc:
        found = svc.resume_session(sid, idle_seconds=3600)
        assert found is not None
        session, caller = found
        assert caller.member.name == "alice" and session.csrf == "csrf-token"
        assert svc.rebuild()["equal"] is True


@pytest.mark.parametrize("fixture", ["schema1.sql", "schema2.sql"])
def test_a_migrated_store_keeps_desk_sessions(tmp_path: Path, fixture: str) -> None:
    data = load_fixture(tmp_path, fixture)
    migrate(data)
    with MemoryService(data) as svc:
        member = next(m for m in svc.list_members() if m.name == "alice")
        _, secret = svc.issue_credential(member.id, "desk")
        sid, session, _ = svc.open_session(secret, idle_seconds=60, max_seconds=300)
    with MemoryService(data) as svc:  # kept in the store, across a restart
        found = svc.resume_session(sid, idle_seconds=60)
        assert found is not None and found[0].key == session.key
