"""``/readyz`` answers 503 when the store does not answer, 200 again once it does — the app
served by uvicorn in a thread of the test, over a real socket, so the store can be stalled or
closed under it."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from palimpsest.api.app import create_app
from palimpsest.api.runtime import runner
from palimpsest.service.memories import MemoryService


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, MemoryService, Any]]:
    svc = MemoryService(tmp_path / "data")
    app = create_app(svc)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield url, svc, app
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        svc.close()


def test_a_stalled_service_thread_is_not_ready(served: tuple[str, MemoryService, Any]) -> None:
    url, _, app = served
    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.get("/readyz").json() == {"status": "ready"}
        stall = threading.Thread(target=lambda: asyncio.run(runner(app).run(time.sleep, 4)))
        stall.start()
        time.sleep(0.2)
        started = time.monotonic()
        stalled = client.get("/readyz")
        assert stalled.status_code == 503
        assert stalled.json() == {"status": "unavailable", "reason": "the store did not answer"}
        assert time.monotonic() - started < 3.5  # bounded by the readiness deadline
        assert client.get("/healthz").status_code == 200  # alive all the same
        stall.join()
        assert client.get("/readyz").status_code == 200


def test_a_closed_store_is_not_ready(served: tuple[str, MemoryService, Any]) -> None:
    url, svc, _ = served
    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.get("/readyz").status_code == 200
        svc.close()
        closed = client.get("/readyz")
        assert closed.status_code == 503 and closed.json()["status"] == "unavailable"
        assert client.get("/healthz").status_code == 200
