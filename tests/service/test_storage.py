"""Storage as history: projections rebuilt from changesets, digests verified on read, CAS on
refs, and no lost or half-written write across kill -9."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from palimpsest.errors import Conflict, Unavailable
from palimpsest.service import MemoryService, history
from palimpsest.service.model import Caller, Changeset, Op
from palimpsest.service.storage.pack import pack, unpack
from tests.conftest import BOTH

BACKENDS = BOTH  # the store is what these tests exercise


def snapshot(svc: MemoryService, caller: Caller, mid: str) -> object:
    records = svc.list_records(caller, mid, include="all", limit=200)["data"]
    return (records, [svc.record_history(caller, mid, r["id"]) for r in records],
            svc.recall(caller, mid, {"text": "alpha beta gamma", "limit": 50}))


def test_rebuild_reproduces_every_projection(svc: MemoryService, owner: Caller) -> None:
    mid = svc.create_memory(owner, {"name": "m"})["id"]
    ids = [svc.remember(owner, mid, {"content": f"alpha {i} beta", "attributes": {"i": i}})["id"]
           for i in range(12)]
    svc.revise(owner, mid, ids[0], {"content": "gamma now"})
    svc.forget(owner, mid, ids[1])
    svc.erase(owner, mid, {"record_ids": [ids[2]]})
    before = snapshot(svc, owner, mid)
    assert svc.get_memory(owner, mid)["records"] == {"count": 10}  # 12 - forgotten - erased
    svc.revise(owner, mid, ids[1], {"content": "back again"})  # a forgotten record returns
    assert svc.get_memory(owner, mid)["records"] == {"count": 11}
    before = snapshot(svc, owner, mid)
    report = svc.rebuild()
    assert report["equal"] is True
    assert svc.get_memory(owner, mid)["records"] == {"count": 11}
    assert report["verified"] == 16 and report["records"] == 11 and report["versions"] == 13
    assert snapshot(svc, owner, mid) == before


def test_tampered_changeset_is_refused_on_read(svc: MemoryService, owner: Caller) -> None:
    mid = svc.create_memory(owner, {"name": "m"})["id"]
    svc.remember(owner, mid, {"content": "original"})
    db = svc._store._db  # past the service, on the store's own connection (autocommit)
    doc = unpack(bytes(db.execute("SELECT doc FROM changesets").fetchone()[0]))
    db.execute("UPDATE changesets SET doc=?", (pack(doc.replace(b'"remember"', b'"forged!!"')),))
    url = getattr(svc._store, "url", None)
    svc.close()
    again = MemoryService(svc._store.data_dir, database=url)
    try:
        with pytest.raises(Unavailable) as exc:
            again.list_changesets(owner, mid)
        assert exc.value.code == "integrity_failure"
        with pytest.raises(Unavailable):
            again.rebuild()
    finally:
        again.close()


def test_tampered_body_is_refused(svc: MemoryService, owner: Caller) -> None:
    mid = svc.create_memory(owner, {"name": "m"})["id"]
    rec = svc.remember(owner, mid, {"content": "original"})
    db = svc._store._db
    for digest, data in db.execute("SELECT digest, data FROM bodies").fetchall():
        db.execute("UPDATE bodies SET data=? WHERE digest=?",
                   (pack(unpack(data).replace(b"original", b"forgery!")), digest))
    with pytest.raises(Unavailable):
        svc.get_record(owner, mid, rec["id"])


def test_changeset_ids_are_digests_and_refs_cas(svc: MemoryService, owner: Caller) -> None:
    mid = svc.create_memory(owner, {"name": "m"})["id"]
    svc.remember(owner, mid, {"content": "one"})
    svc.remember(owner, mid, {"content": "two"})
    log = svc.list_changesets(owner, mid)["data"]
    assert len(log) == 2 and log[0]["parent_ids"] == [log[1]["changeset_id"]]
    for doc in log:
        cs = Changeset.from_document(doc)
        assert history.verify(cs).id == doc["changeset_id"] == doc["integrity_digest"]
    refs = svc.list_refs(owner, mid)["data"]
    assert [(r["ref_name"], r["head_changeset_id"], r["protected"]) for r in refs] == [
        ("refs/shared/main", log[0]["changeset_id"], True)]
    core = svc._core
    op = Op("add_record", None, {"record_id": "hrec_x", "body_digest": "0" * 64,
                                 **history.writer_payload("2026-01-01T00:00:00.000000Z",
                                                          owner.writer)})
    # A second ref of the same memory, with its own CAS, not projected into records.
    with svc._store.write():
        agent = core.commit(mid, owner.writer, "k-agent", [op], "draft",
                            ref_name=f"refs/agents/{owner.member.id}/main", expected_head=None)
    assert svc._store.ref(mid, f"refs/agents/{owner.member.id}/main").head == agent.id
    assert len(svc.list_records(owner, mid)["data"]) == 2
    with pytest.raises(Conflict) as exc, svc._store.write():
        core.commit(mid, owner.writer, "k2", [op], "stale", expected_head=log[1]["changeset_id"])
    assert exc.value.code == "cas_mismatch"
    assert svc._store.ref(mid, "refs/shared/main").head == log[0]["changeset_id"]


def test_closed_op_payload_keys(owner: Caller) -> None:
    good = history.writer_payload("2026-01-01T00:00:00.000000Z", owner.writer)
    for op in (Op("add_record", None, {**good, "record_id": "r", "body_digest": "d",
                                       "evil": 1}),
               Op("add_record", "r", {**good, "record_id": "r", "body_digest": "d"}),
               Op("forget_record", None, good), Op("drop_table", None, good),
               Op("revise_record", "r", good)):
        with pytest.raises(Exception) as exc:
            history.make_changeset("m", "refs/shared/main", (), "member:x", "", "k", [op],
                                   "2026-01-01T00:00:00.000000Z")
        assert getattr(exc.value, "code", None) == "memory_invalid"


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from palimpsest.service import MemoryService
    svc = MemoryService(Path(sys.argv[1]))
    made = svc.bootstrap_owner()
    caller = svc.caller(made[0].id)
    mid = svc.create_memory(caller, {"name": "crash"})["id"]
    print("MEMORY", made[0].id, mid, flush=True)
    i = 0
    while True:
        rec = svc.remember(caller, mid, {"content": f"entry {i} " + "x" * 2000})
        print("ACK", rec["id"], flush=True)
        i += 1
""")


@pytest.mark.slow
def test_kill_9_loses_no_acknowledged_write_and_leaves_no_half(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(data)], stdout=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stdout is not None
    header = proc.stdout.readline().split()
    acked: list[str] = []
    deadline = time.monotonic() + 60
    while len(acked) < 150 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("ACK"):
            acked.append(line.split()[1])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert len(acked) >= 150
    svc = MemoryService(data)
    try:
        caller = svc.caller(header[1])
        mid = header[2]
        for rid in acked:
            assert svc.get_record(caller, mid, rid)["id"] == rid
        log_len = len(list(svc._store.changesets(mid)))
        stored = svc._store.counts()
        # Every changeset is whole: one record per changeset, all digests verify.
        assert stored["records"] == log_len == stored["indexed"] >= len(acked)
        report = svc.rebuild()
        assert report["verified"] == log_len and report["records"] == log_len
        ok = svc._store._db.execute("PRAGMA integrity_check").fetchone()[0]
        assert ok == "ok"
    finally:
        svc.close()


@pytest.mark.parametrize("schema", ["1", None])
def test_a_store_of_another_schema_is_refused_with_the_command_that_converts_it(
        tmp_path: Path, schema: str | None) -> None:
    db = sqlite3.connect(tmp_path / "palimpsest.db")
    db.execute("CREATE TABLE records (n INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE)")
    if schema is not None:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('schema', ?)", (schema,))
    db.commit()
    db.close()
    before = (tmp_path / "palimpsest.db").read_bytes()
    with pytest.raises(Unavailable) as err:
        MemoryService(tmp_path)
    assert err.value.code == "memory_unavailable"
    assert f"schema {schema or 'none'}" in err.value.message
    assert err.value.hint is not None and "migrate" in err.value.hint
    assert f"pal admin --data-dir {tmp_path} migrate" in err.value.hint
    assert (tmp_path / "palimpsest.db").read_bytes() == before  # never misread, never changed


def test_rebuild_reports_a_projection_changed_outside_the_service(svc: MemoryService,
                                                                  owner: Caller) -> None:
    mid = svc.create_memory(owner, {"name": "m"})["id"]
    svc.remember(owner, mid, {"content": "plain", "attributes": {"standing": False}})
    assert svc.rebuild()["equal"] is True
    svc._store._db.execute("UPDATE records SET standing = 1")  # forged outside the service
    assert svc.prime(owner, mid, 1000)["records"]
    report = svc.rebuild()
    assert report["equal"] is False and report["written"] is False
    assert report["differences"] and all(line.startswith("record ")
                                         for line in report["differences"])
    assert svc.prime(owner, mid, 1000)["records"]  # nothing written while not equal
    assert svc.rebuild(repair=True)["written"] is True
    assert svc.prime(owner, mid, 1000)["records"] == []  # the history wins


def test_a_failing_store_reports_unavailable_and_keeps_nothing(svc: MemoryService,
                                                               owner: Caller) -> None:
    mid = svc.create_memory(owner, {"name": "m"})["id"]
    # A trigger makes the projection insert fail inside the write, as a full disk would.
    server = hasattr(svc._store, "url")  # PostgreSQL: a trigger runs a function
    svc._store._db.execute(
        "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS "
        "'BEGIN RAISE EXCEPTION ''disk full''; END'" if server else
        "CREATE TRIGGER boom BEFORE INSERT ON records BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    if server:
        svc._store._db.execute("CREATE TRIGGER boom BEFORE INSERT ON records FOR EACH ROW "
                               "EXECUTE FUNCTION boom()")
    with pytest.raises(Unavailable) as exc:
        svc.remember(owner, mid, {"content": "lost?"})
    assert exc.value.code == "memory_unavailable"
    svc._store._db.execute("DROP TRIGGER boom ON records" if server else "DROP TRIGGER boom")
    assert svc.list_changesets(owner, mid)["data"] == []
    assert svc.list_records(owner, mid)["data"] == []
    assert svc.remember(owner, mid, {"content": "after"})["version"] == 1


def test_a_replay_answers_the_first_response_after_the_record_moved_on(
        svc: MemoryService, owner: Caller) -> None:
    mid = svc.create_memory(owner, {"name": "m"})["id"]
    first = svc.remember(owner, mid, {"content": "v1 words"}, idempotency_key="once")
    svc.revise(owner, mid, first["id"], {"content": "v2 words"})
    assert svc.remember(owner, mid, {"content": "v1 words"}, idempotency_key="once") == first
    svc.forget(owner, mid, first["id"])
    assert svc.remember(owner, mid, {"content": "v1 words"}, idempotency_key="once") == first
    # the stored answer is a reference into history, not a second copy of the words
    row = svc._store._db.execute("SELECT response FROM idempotency WHERE key='once'").fetchone()
    assert b"v1 words" not in bytes(row[0])
