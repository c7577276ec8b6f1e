"""CPU cost of the telemetry middleware (request id, metrics, access-log check, route template).

Usage: ``.venv/bin/python bench/telemetry_overhead.py [--requests 20000] [--repeats 3]``

Drives ASGI calls in process, so only CPU is measured (``time.process_time``; the machine's
load barely matters): a bare ASGI app that answers 200 (the same-run baseline) against the same
app wrapped by :class:`palimpsest.api.telemetry.middleware.Telemetry`, for a ``remember``
path that reaches the middleware without a routed template (the fast handler's case, the most
expensive: the template is matched by hand). Prints one JSON document; the per-request
overhead is to be set beside the server's CPU per write in ``bench/service.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from palimpsest.api.app import create_app
from palimpsest.api.telemetry.metrics import Metrics
from palimpsest.api.telemetry.middleware import Telemetry
from palimpsest.service.memories import MemoryService


async def _bare(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b"{}"})


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _send(message: dict[str, Any]) -> None:
    return None


def _scope() -> dict[str, Any]:
    return {"type": "http", "method": "POST", "root_path": "", "client": ("127.0.0.1", 1),
            "path": "/v1/memories/hmem_abcdefghijklmnopqrstuvwxyz/records",
            "headers": [(b"host", b"127.0.0.1"), (b"authorization", b"Bearer x")]}


async def _cpu_us(app: Any, n: int) -> float:
    started = time.process_time()
    for _ in range(n):
        await app(_scope(), _receive, _send)
    return (time.process_time() - started) / n * 1e6


async def _measure(requests: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, MemoryService(Path(tmp)) as svc:
        routes = create_app(svc).router.routes
        wrapped = Telemetry(_bare, metrics=Metrics(), routes=lambda: routes)
        await _cpu_us(wrapped, 1000)  # warm up (the template table is built on first use)
        bare, with_telemetry = [], []
        for _ in range(repeats):
            bare.append(await _cpu_us(_bare, requests))
            with_telemetry.append(await _cpu_us(wrapped, requests))
    b, w = statistics.median(bare), statistics.median(with_telemetry)
    return {"benchmark": "telemetry_overhead", "requests": requests, "repeats": repeats,
            "bare_cpu_us": round(b, 2), "with_telemetry_cpu_us": round(w, 2),
            "overhead_cpu_us": round(w - b, 2), "load_average": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(_measure(args.requests, args.repeats)), indent=2))


if __name__ == "__main__":
    main()
