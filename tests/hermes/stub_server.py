"""A scripted HTTP server over real sockets for the provider's unit tests.

It answers the two UHP routes the provider uses (recall, observe) from a record list the test
controls, and can be told to misbehave (redirect, oversize body, bad JSON, error status) — things
a correct Palimpsest server never does, which is why these tests use a scripted server. The
integration test in test_hermes_live.py runs the provider against the real `pal serve`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    token: str = "tok-agent"
    records: list[dict[str, Any]] = field(default_factory=list)
    mode: str = "ok"  # ok | redirect | huge | badjson | error | slow
    requests: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def record(rid: str, text: str, writer: str = "agent-1", memory: str = "hmem_a") -> dict[str, Any]:
    """One recall result in the reference shape (uhp-memories.md §7)."""
    return {
        "record": {
            "id": rid,
            "object": "memory.record",
            "memory_id": memory,
            "type": "fact",
            "title": text[:40],
            "content": [{"type": "text", "text": text}],
            "written_by": {"kind": "member", "id": writer, "type": "agent"},
            "version": 1,
            "status": "active",
            "trust": "untrusted",
        },
        "memory": {"id": memory, "name": "Team"},
        "score": 1.0,
        "why": ["text"],
    }


class StubServer:
    def __init__(self) -> None:
        self.script = Script()
        script = self.script

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(
                self, status: int, body: bytes, headers: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                script.requests.append((self.path, self.headers.get("Authorization", ""), body))
                if self.headers.get("Authorization") != f"Bearer {script.token}":
                    self._send(
                        401,
                        b'{"error":{"type":"authentication_error","code":"invalid_credential"}}',
                    )
                    return
                if script.mode == "redirect":
                    self._send(307, b"{}", {"Location": "http://127.0.0.1:1/elsewhere"})
                    return
                if script.mode == "error":
                    self._send(
                        503, b'{"error":{"type":"server_error","code":"memory_unavailable"}}'
                    )
                    return
                if script.mode == "slow":
                    script.release.wait(10)
                if self.path.endswith("/observe"):
                    self._send(200, b'{"object":"list","data":[]}')
                    return
                if script.mode == "huge":
                    self._send(200, b'{"results":[],"pad":"' + b"x" * 300000 + b'"}')
                    return
                if script.mode == "badjson":
                    self._send(200, b'{"results":[],"results":[]}')
                    return
                answer = {
                    "object": "memory.recall",
                    "results": script.records,
                    "degraded": [],
                    "abstain": False,
                }
                self._send(200, json.dumps(answer).encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.script.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
