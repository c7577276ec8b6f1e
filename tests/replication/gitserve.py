"""A small smart-HTTP Git server for tests: ``git http-backend`` behind a loopback HTTP server.

The server runs in a thread of the test process, listens on 127.0.0.1 on a free port and
serves every repository below ``root`` (read and push).  Nothing leaves the machine.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote


def _backend_env(root: Path, handler: BaseHTTPRequestHandler, path: str, query: str,
                 length: int) -> dict[str, str]:  # fmt: skip
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/nonexistent"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_PROJECT_ROOT": str(root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "REMOTE_USER": "test",  # enables receive-pack (publication tests)
        "REMOTE_ADDR": "127.0.0.1",
        "REQUEST_METHOD": handler.command,
        "PATH_INFO": unquote(path),
        "QUERY_STRING": query,
        "CONTENT_LENGTH": str(length),
        "SERVER_PROTOCOL": "HTTP/1.0",
        "GATEWAY_INTERFACE": "CGI/1.1",
    }
    for header, name in (
        ("Content-Type", "CONTENT_TYPE"),
        ("Content-Encoding", "HTTP_CONTENT_ENCODING"),
        ("Git-Protocol", "HTTP_GIT_PROTOCOL"),
    ):
        value = handler.headers.get(header)
        if value:
            env[name] = value
    return env


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                handler.rfile.readline()
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


def _make_handler(root: Path, log: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            path, _, query = self.path.partition("?")
            body = _read_body(self) if self.command == "POST" else b""
            log.append(f"{self.command} {path}")
            done = subprocess.run(
                ["git", "http-backend"],
                input=body,
                env=_backend_env(root, self, path, query, len(body)),
                capture_output=True,
                check=False,
            )
            raw = done.stdout
            split = raw.find(b"\r\n\r\n")
            sep = 4
            if split < 0:
                split, sep = raw.find(b"\n\n"), 2
            head, payload = raw[:split], raw[split + sep :]
            status = 200
            headers: list[tuple[str, str]] = []
            for line in head.decode("latin-1").splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.strip().split(" ")[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _serve
        do_POST = _serve

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@contextmanager
def serve_git(root: Path) -> Iterator[tuple[str, list[str]]]:
    """Serve ``root`` over smart HTTP; yield ``(base_url, request_log)``."""
    log: list[str] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(root, log))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}", log
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
