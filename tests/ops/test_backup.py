"""``pal admin backup`` while a real server takes writes from 8 writers, then ``restore``.

The backup runs as the real command in its own process beside the serving one. What it must
hold is bracketed by what the writers saw: every record acknowledged before the backup started
is in it, nothing is in it that the server never acknowledged, every record in it equals the
live one, every file a record in it names comes back byte for byte (one writer erases its own
files meanwhile, which takes bytes away under the copy), and the restore's rebuild is equal.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.server import Server, ok, pal_command, provision, start

WRITERS = 8


def _pal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(pal_command(*args), capture_output=True, text=True, timeout=300,
                          check=False)


class Writers:
    """8 threads writing until told to stop; what each had acknowledged, and when."""

    def __init__(self, server: Server, token: str, memory_id: str) -> None:
        self.server, self.token, self.memory_id = server, token, memory_id
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: list[str] = []          # record ids, in the order their answers came
        self.files: dict[str, bytes] = {}   # record id → the bytes its file part names
        self.erased: set[str] = set()
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._run, args=(n,)) for n in range(WRITERS)]

    def _run(self, n: int) -> None:
        with self.server.client(self.token) as c:
            i = 0
            while not self.stop.is_set():
                i += 1
                try:
                    self._one(c, n, i)
                except (AssertionError, httpx.HTTPError) as exc:
                    self.errors.append(f"writer {n}: {exc}")
                    return

    def _one(self, c: httpx.Client, n: int, i: int) -> None:
        path = f"/v1/memories/{self.memory_id}"
        if n < 2:  # two writers attach files; writer 1 erases its previous one
            data = f"writer {n} file {i} ".encode() * 200
            upload = ok(c.post("/v1/files", content=data, params={"name": f"f{n}-{i}.txt"},
                               headers={"Content-Type": "text/plain"}))
            made = ok(c.post(f"{path}/records", json={"content": [
                {"type": "text", "text": f"writer {n} attachment {i}"},
                {"type": "file", "file": {"id": upload["id"]}}]}))
            with self.lock:
                self.files[made["id"]] = data
                self.acked.append(made["id"])
            if n == 1 and i > 1:
                previous = [r for r in self.files if r != made["id"]][-1]
                ok(c.post(f"{path}/erase", json={"record_ids": [previous]}))
                with self.lock:
                    self.erased.add(previous)
            return
        made = ok(c.post(f"{path}/records", json={
            "content": f"writer {n} remembers the release train number {i}",
            "attributes": {"writer": n, "i": i}}))
        with self.lock:
            self.acked.append(made["id"])

    def snapshot(self) -> set[str]:
        with self.lock:
            return set(self.acked)


@pytest.fixture
def serving(tmp_path: Path) -> Any:
    data = tmp_path / "data"
    members = provision(data, ())
    server = start(data)
    try:
        yield server, members["owner"].token
    finally:
        server.stop()


def _records(c: httpx.Client, memory_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 100, "include": "all"}
        if cursor:
            params["cursor"] = cursor
        page = ok(c.get(f"/v1/memories/{memory_id}/records", params=params))
        out.update({r["id"]: r for r in page["data"]})
        cursor = page["next"]
        if cursor is None:
            return out


def test_backup_while_8_writers_run_then_restore(serving: tuple[Server, str],
                                                  tmp_path: Path) -> None:
    server, token = serving
    with server.client(token) as c:
        memory = ok(c.post("/v1/memories", json={"name": "busy"}))
    writers = Writers(server, token, memory["id"])
    for t in writers.threads:
        t.start()
    try:
        while len(writers.snapshot()) < 40 and not writers.errors:
            threading.Event().wait(0.05)
        before = writers.snapshot()
        made = _pal("admin", "--data-dir", str(server.data_dir), "backup",
                    str(tmp_path / "backup"), "--json")
        during = writers.snapshot()
    finally:
        writers.stop.set()
        for t in writers.threads:
            t.join(timeout=60)
    assert not writers.errors, writers.errors
    assert made.returncode == 0, made.stderr
    report = json.loads(made.stdout)
    assert report["database"]["sha256"] == hashlib.sha256(
        (tmp_path / "backup" / "palimpsest.db").read_bytes()).hexdigest()

    restored_dir = tmp_path / "restored"
    done = _pal("admin", "--data-dir", str(restored_dir), "restore", str(tmp_path / "backup"),
                "--json")
    assert done.returncode == 0, done.stderr
    restored_report = json.loads(done.stdout)
    assert restored_report["rebuild"]["equal"] is True
    assert restored_report["rebuild"]["verified"] == restored_report["rebuild"]["changesets"]
    assert {p.stat().st_mode & 0o777 for p in restored_dir.rglob("*")} <= {0o600, 0o700}

    with server.client(token) as c:
        live = _records(c, memory["id"])
    again = start(restored_dir)
    try:
        with again.client(token) as c:
            held = _records(c, memory["id"])
            # an erased record is gone from every read: it counts on neither side
            assert before - writers.erased <= set(held), "an acknowledged write is missing"
            assert set(held) <= set(live) | writers.erased, \
                "the backup holds a write never acknowledged"
            moved = 0
            for rid, record in held.items():
                if rid not in live:
                    moved += 1  # erased after the snapshot: the backup keeps what it had
                    assert rid in writers.erased
                    continue
                assert record == live[rid]
            for rid, data in writers.files.items():
                if rid in held:
                    got = c.get(f"/v1/memories/{memory['id']}/records/{rid}/content/1")
                    assert got.status_code == 200, got.text
                    assert got.content == data
    finally:
        again.stop()
    # what the run covered, for the reader of a failure (not a threshold)
    print(f"acked before {len(before)}, during {len(during - before)}, held {len(held)}, "
          f"live {len(live)}, erased after the snapshot {moved}")


def test_restore_refuses_a_damaged_backup_and_writes_nothing(serving: tuple[Server, str],
                                                            tmp_path: Path) -> None:
    server, token = serving
    with server.client(token) as c:
        memory = ok(c.post("/v1/memories", json={"name": "one"}))
        upload = ok(c.post("/v1/files", content=b"precious bytes",
                           headers={"Content-Type": "text/plain"}))
        ok(c.post(f"/v1/memories/{memory['id']}/records", json={"content": [
            {"type": "file", "file": {"id": upload["id"]}}]}))
    backup = tmp_path / "backup"
    assert _pal("admin", "--data-dir", str(server.data_dir), "backup", str(backup)).returncode == 0
    (stored,) = (backup / "files").rglob("*/*")
    stored.write_bytes(b"precious bytez")
    target = tmp_path / "restored"
    refused = _pal("admin", "--data-dir", str(target), "restore", str(backup))
    assert refused.returncode == 1
    assert "missing from the backup or damaged" in refused.stderr
    assert "nothing was restored" in refused.stderr
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []

    occupied = _pal("admin", "--data-dir", str(server.data_dir), "restore", str(backup))
    assert occupied.returncode == 1
    assert "already exists and is not empty" in occupied.stderr
    again = _pal("admin", "--data-dir", str(server.data_dir), "backup", str(backup))
    assert again.returncode == 1
    assert "already exists and is not empty" in again.stderr
    not_one = _pal("admin", "--data-dir", str(target), "restore", str(server.data_dir))
    assert not_one.returncode == 1
    assert "is not a backup made by pal admin backup" in not_one.stderr


def test_a_postgresql_store_is_not_taken_for_an_embedded_one(tmp_path: Path) -> None:
    for args in (("backup", str(tmp_path / "b")), ("restore", str(tmp_path))):
        refused = _pal("admin", "--data-dir", str(tmp_path / "d"), "--database",
                       "postgresql://pal@127.0.0.1:1/none", *args)
        assert refused.returncode == 1
        assert "works on the embedded SQLite store" in refused.stderr
        assert "pg_dump" in refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
