"""Another process's writer, for tests of what a store does while one holds the lock.

"Another process's writer" is a second store opened on the same backend, holding a write
transaction that took a memory's writer lock (:meth:`Store.lock_memory`): on SQLite the file's
one write lock, on PostgreSQL the memory's advisory lock. A test's own service, or a running
``pal serve``, then has to wait for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from palimpsest.service.storage import open_store
from tests.conftest import Backend


@contextmanager
def other_writer(backend: Backend, memory_id: str) -> Iterator[None]:
    """Another process's writer of ``memory_id``, holding its lock until the block ends."""
    other = open_store(backend.data_dir, database=backend.database_url)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with other.write():
            other.lock_memory(memory_id)
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(30)
        yield
    finally:
        release.set()
        thread.join(30)
        other.close()
