"""Safe file permissions whatever the umask: the data directory is 0700, everything in it 0600.

Under the common umask 022 a store used to be 0755 with a 0644 database, so any local user read
every memory, restricted ones included. The store now creates its directories 0700 and its
files 0600 and tightens what an older build left loose.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from palimpsest.service.memories import MemoryService
from tests.api.server import ok, provision, start


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _modes(root: Path) -> dict[str, int]:
    out = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        out[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return out


def _assert_private(root: Path) -> None:
    modes = _modes(root)
    loose = {name: oct(mode) for name, mode in modes.items()
             if mode != (0o700 if (root / name).is_dir() else 0o600)}
    assert not loose, loose


def _fill(data_dir: Path) -> None:
    with MemoryService(data_dir) as svc:
        made = svc.bootstrap_owner()
        assert made is not None
        owner = svc.caller(made[0].id)
        memory = svc.create_memory(owner, {"name": "Team"})
        upload = svc.upload_file(owner, b"quarterly numbers\n", name="q3.txt",
                                 media_type="text/plain")
        svc.remember(owner, memory["id"], {"type": "note", "content": [
            {"type": "text", "text": "Q3"}, {"type": "file", "file": {"id": upload["id"]}}]})


def test_store_is_private_under_umask_022(tmp_path: Path, umask_022: None) -> None:
    data_dir = tmp_path / "data"
    _fill(data_dir)
    names = set(_modes(data_dir))
    assert {"palimpsest.db", "files"} <= names
    assert any(name.startswith("files/") and not (data_dir / name).is_dir() for name in names)
    _assert_private(data_dir)


def test_a_loose_store_from_an_older_build_is_tightened(tmp_path: Path, umask_022: None) -> None:
    data_dir = tmp_path / "data"
    _fill(data_dir)
    for path in [data_dir, *data_dir.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    MemoryService(data_dir).close()
    modes = _modes(data_dir)
    assert modes["."] == 0o700 and modes["files"] == 0o700
    assert modes["palimpsest.db"] == 0o600


def test_running_server_keeps_its_files_private(tmp_path: Path, umask_022: None) -> None:
    data_dir = tmp_path / "data"
    made = provision(data_dir, [])
    server = start(data_dir)  # the child inherits umask 022
    try:
        with server.client(made["owner"].token) as client:
            mid = ok(client.post("/v1/memories", json={"name": "Team"}))["id"]
            upload = ok(client.post("/v1/files?name=a.txt", content=b"secret numbers\n",
                                    headers={"content-type": "text/plain"}))
            ok(client.post(f"/v1/memories/{mid}/records", json={"type": "note", "content": [
                {"type": "file", "file": {"id": upload["id"]}, "text": "bytes"}]}))
            _assert_private(data_dir)  # -wal and -shm exist while the server runs
            assert (data_dir / "palimpsest.db-wal").exists()
    finally:
        server.stop()
    _assert_private(data_dir)
