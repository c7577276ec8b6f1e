"""A mount lives in the store behind the Store protocol: the same on SQLite and on PostgreSQL
(the rest of tests/service/test_mounts.py runs on the embedded store only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from palimpsest.errors import InvalidInput
from palimpsest.service import MemoryService
from tests.conftest import BOTH, Backend

from .test_mounts import _hn, _ids, _repo

BACKENDS = BOTH

def test_mount_on_every_store(backend: Backend, tmp_path: Path) -> None:
    """The mount row and the provider change live in the store behind the Store protocol: the
    same on SQLite and on PostgreSQL, and kept across a reopen."""
    repo = _repo(tmp_path / "repo")
    with MemoryService(backend.data_dir, database=backend.database_url) as svc:
        made = svc.bootstrap_owner()
        assert made is not None
        owner = svc.authenticate(made[1])
        mid = svc.create_memory(owner, {"name": "Repo"})["id"]
        svc.mount_repository(mid, tmp_path / "repo")
    with MemoryService(backend.data_dir, database=backend.database_url) as svc:
        owner = svc.authenticate(made[1])
        assert svc.get_memory(owner, mid)["provider"] == "hn-memory"
        assert _ids(svc.recall(owner, mid, {"text": "streams"})) == [
            m["id"] for m in _hn(repo, query="streams", max_records=8)]
        with pytest.raises(InvalidInput) as ro:
            svc.remember(owner, mid, {"content": "x"})
        assert ro.value.code == "memory_unsupported"
        svc.delete_memory(owner, mid)
        assert svc._store.mounts() == {}
