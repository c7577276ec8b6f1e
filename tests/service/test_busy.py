"""Several processes over one store: readers never wait, a writer waits a bounded time for
the writer of another process and is then refused in the service's words — busy, retry after
a second — with nothing of its write kept (``pal serve --workers N``, ``pal admin``).
"""

from __future__ import annotations

import threading
import time

import pytest

from palimpsest.errors import Unavailable
from palimpsest.service import MemoryService
from tests.conftest import BOTH, Backend
from tests.otherwriter import other_writer

BACKENDS = BOTH


def _service(backend: Backend, wait: float) -> MemoryService:
    return MemoryService(backend.data_dir, database=backend.database_url, write_wait=wait)


def test_a_write_past_the_wait_is_refused_as_busy_and_keeps_nothing(backend: Backend) -> None:
    with _service(backend, 0.3) as svc:
        owner, _ = svc.bootstrap_owner() or pytest.fail("fresh store")
        caller = svc.caller(owner.id)
        mid = svc.create_memory(caller, {"name": "m"})["id"]
        svc.remember(caller, mid, {"content": "before"})
        with other_writer(backend, mid):
            started = time.monotonic()
            with pytest.raises(Unavailable) as refused:
                svc.remember(caller, mid, {"content": "during"}, idempotency_key="k1")
            waited = time.monotonic() - started
            # reads go on while the other process writes
            seen = svc.list_records(caller, mid)["data"]
        assert waited >= 0.3
        exc = refused.value
        assert exc.code == "memory_unavailable" and exc.retry_after == 1
        assert "busy" in str(exc) and "retry after 1 second" in str(exc)
        assert "lock" not in str(exc).lower()  # neither SQLite's nor PostgreSQL's words
        assert [r["content"] for r in seen] == [[{"type": "text", "text": "before"}]]
        # nothing of the refused write stayed: the same key now writes it, once
        made = svc.remember(caller, mid, {"content": "during"}, idempotency_key="k1")
        texts = [r["content"][0]["text"] for r in svc.list_records(caller, mid)["data"]]
        assert sorted(texts) == ["before", "during"]
        assert svc.remember(caller, mid, {"content": "during"}, idempotency_key="k1") == made


def test_a_writer_gets_the_lock_as_soon_as_the_other_lets_go(backend: Backend) -> None:
    with _service(backend, 10) as svc:
        owner, _ = svc.bootstrap_owner() or pytest.fail("fresh store")
        caller = svc.caller(owner.id)
        mid = svc.create_memory(caller, {"name": "m"})["id"]
        with other_writer(backend, mid):
            started = time.monotonic()
            writer = threading.Thread(
                target=lambda: svc.remember(caller, mid, {"content": "waited"}))
            writer.start()
            time.sleep(0.2)
            assert writer.is_alive()  # it waits for the other writer …
        writer.join(10)
        waited = time.monotonic() - started
        # … and goes ahead once it lets go, well inside the bound
        assert not writer.is_alive() and 0.15 <= waited < 10
        assert len(svc.list_records(caller, mid)["data"]) == 1
