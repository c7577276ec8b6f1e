"""Several processes over one SQLite file: readers never wait, a writer waits a bounded time
for the writer of another process and is then refused in the service's words — busy, retry
after a second — with nothing of its write kept (``pal serve --workers N``, ``pal admin``)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from palimpsest.errors import Unavailable
from palimpsest.service import MemoryService


@contextmanager
def other_writer(data_dir: Path) -> Iterator[None]:
    """Another process's writer, as SQLite sees it: a second connection holding the write
    lock of the file."""
    db = sqlite3.connect(data_dir / "palimpsest.db", isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
        db.execute("ROLLBACK")
    finally:
        db.close()


def test_a_write_past_the_wait_is_refused_as_busy_and_keeps_nothing(tmp_path: Path) -> None:
    with MemoryService(tmp_path, write_wait=0.3) as svc:
        owner, _ = svc.bootstrap_owner() or pytest.fail("fresh store")
        caller = svc.caller(owner.id)
        mid = svc.create_memory(caller, {"name": "m"})["id"]
        svc.remember(caller, mid, {"content": "before"})
        with other_writer(tmp_path):
            started = time.monotonic()
            with pytest.raises(Unavailable) as refused:
                svc.remember(caller, mid, {"content": "during"}, idempotency_key="k1")
            waited = time.monotonic() - started
            # reads go on while the other process writes (WAL)
            seen = svc.list_records(caller, mid)["data"]
        assert waited >= 0.3
        exc = refused.value
        assert exc.code == "memory_unavailable" and exc.retry_after == 1
        assert "busy" in str(exc) and "retry after 1 second" in str(exc)
        assert "locked" not in str(exc).lower()
        assert [r["content"] for r in seen] == [[{"type": "text", "text": "before"}]]
        # nothing of the refused write stayed: the same key now writes it, once
        made = svc.remember(caller, mid, {"content": "during"}, idempotency_key="k1")
        texts = [r["content"][0]["text"] for r in svc.list_records(caller, mid)["data"]]
        assert sorted(texts) == ["before", "during"]
        assert svc.remember(caller, mid, {"content": "during"}, idempotency_key="k1") == made


def test_a_writer_gets_the_lock_as_soon_as_the_other_lets_go(tmp_path: Path) -> None:
    with MemoryService(tmp_path, write_wait=10) as svc:
        owner, _ = svc.bootstrap_owner() or pytest.fail("fresh store")
        caller = svc.caller(owner.id)
        mid = svc.create_memory(caller, {"name": "m"})["id"]
        held = threading.Event()
        release = threading.Event()

        def hold() -> None:
            with other_writer(tmp_path):
                held.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(10)
        threading.Timer(0.2, release.set).start()
        started = time.monotonic()
        svc.remember(caller, mid, {"content": "waited"})
        waited = time.monotonic() - started
        holder.join()
        # it waited for the other writer, then went ahead well inside the bound
        assert 0.15 <= waited < 10
        assert len(svc.list_records(caller, mid)["data"]) == 1
