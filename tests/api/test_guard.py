"""The guard on its own, in-process (ASGI messages, no sockets): what cannot be driven quickly
through a real server — a slow-drip body cut off by the read deadline."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from palimpsest.api.guard import Guard, GuardConfig, Limits


async def _reached(scope: dict[str, Any], receive: Any, send: Any) -> None:
    raise AssertionError("the app must not be reached")


async def _caller(token: str) -> str:
    return "caller"


def _scope(length: int) -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": "/v1/memories",
            "headers": [(b"host", b"127.0.0.1"), (b"authorization", b"Bearer t"),
                        (b"content-type", b"application/json"),
                        (b"content-length", str(length).encode())]}


def test_slow_drip_body_is_cut_off() -> None:
    guard = Guard(_reached, config=GuardConfig(limits=Limits(body_read_seconds=0.2)),
                  authenticate=_caller)
    sent: list[dict[str, Any]] = []
    chunks = 0

    async def receive() -> dict[str, Any]:
        nonlocal chunks
        chunks += 1
        await asyncio.sleep(0.05)  # one byte every 50 ms: far too slow
        return {"type": "http.request", "body": b" ", "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(guard(_scope(1000), receive, send))
    assert sent[0]["status"] == 408
    assert json.loads(sent[1]["body"])["error"]["code"] == "x.pal.request_timeout"
    assert chunks < 20  # stopped reading at the deadline


def test_bearer_token_takes_one_printable_ascii_credential() -> None:
    from palimpsest.api.guard import bearer_token

    assert bearer_token("Bearer pal_hcred_a_b", 512) == "pal_hcred_a_b"
    assert bearer_token("bearer   pal_x  ", 512) == "pal_x"
    for value in ("", "Bearer", "Bearer ", "Basic pal_x", "Bearer caf\xe9", "Bearer a\x00",
                  "B\xe9arer x", "Bearer " + "a" * 513):
        assert bearer_token(value, 512) is None, value
