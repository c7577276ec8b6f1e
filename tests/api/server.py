"""Start and stop a real ``pal serve`` process on a free loopback port, and talk to it.

Used by tests/api and tests/conformance: the server is the real command (uvicorn over real
sockets, the embedded SQLite store in a temporary data directory). Members and credentials are
provisioned with ``pal admin``'s own facade calls on the data directory *before* the server
starts, so nothing in a test reaches around the HTTP surface while the server runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from palimpsest.service.memories import MemoryService


@dataclass
class Server:
    """One running ``pal serve``."""

    url: str
    proc: subprocess.Popen[bytes]
    data_dir: Path
    owner: str | None = None  # the owner credential printed on first start
    announce: dict[str, Any] = field(default_factory=dict)

    def client(self, token: str | None, **headers: str) -> httpx.Client:
        """A keep-alive client bearing ``token`` (``None``: no Authorization header)."""
        merged = dict(headers)
        if token is not None:
            merged["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=merged, timeout=30.0)

    def stop(self) -> int:
        """SIGTERM, wait; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        return self.proc.returncode

    def kill9(self) -> None:
        """SIGKILL: no shutdown, no flush — a crash."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=20)

    def stderr(self) -> str:
        """What the server wrote to stderr so far."""
        log = self.data_dir.parent / f"{self.data_dir.name}.stderr"
        return log.read_text(errors="replace") if log.exists() else ""


def pal_command(*args: str) -> list[str]:
    """``pal ARGS`` run with the test interpreter."""
    return [sys.executable, "-m", "palimpsest.cli.main", *args]


def start(data_dir: Path, *extra: str, env: dict[str, str] | None = None) -> Server:
    """Start ``pal serve --data-dir D --host 127.0.0.1 --port 0 --json`` and wait for its
    start-up line (printed once the socket listens)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir.parent / f"{data_dir.name}.stderr"
    with log.open("ab") as err:
        proc = subprocess.Popen(
            pal_command("serve", "--data-dir", str(data_dir), "--host", "127.0.0.1",
                        "--port", "0", "--json", *extra),
            stdout=subprocess.PIPE,
            stderr=err,
            env={**os.environ, **(env or {})},
        )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=20)
        raise RuntimeError(f"pal serve did not start: {log.read_text(errors='replace')}")
    announce = json.loads(line)
    owner = announce.get("owner", {}).get("credential")
    return Server(url=announce["url"], proc=proc, data_dir=data_dir, owner=owner,
                  announce=announce)


@dataclass(frozen=True)
class Member:
    """A provisioned member and its bearer secret."""

    id: str
    token: str
    name: str


def provision(data_dir: Path, names: Iterable[tuple[str, str]],
              groups: dict[str, list[str]] | None = None, *,
              database: str | None = None) -> dict[str, Any]:
    """Create members (``(name, type)``), their credentials and groups in ``data_dir`` (and
    the PostgreSQL ``database``) before the server starts. Returns ``{"owner": Member, name:
    Member, "group:<name>": group id}``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    with MemoryService(data_dir, database=database) as svc:
        made = svc.bootstrap_owner()
        assert made is not None, "provision() needs a fresh data directory"
        owner, secret = made
        out["owner"] = Member(owner.id, secret, "owner")
        for name, type_ in names:
            member = svc.create_member(name, type_)
            _, token = svc.issue_credential(member.id, f"test {name}")
            out[name] = Member(member.id, token, name)
        for gname, members in (groups or {}).items():
            group = svc.create_group(gname)
            for mname in members:
                svc.add_membership(group.id, out[mname].id)
            out[f"group:{gname}"] = group.id
    return out


def ok(response: httpx.Response, status: int = 200) -> Any:
    """The JSON body of a response that must have ``status``; fails with the body otherwise."""
    assert response.status_code == status, (response.status_code, response.text)
    return response.json()


def err(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Assert an error envelope with ``status`` and ``code``; returns the ``error`` object."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert error["code"] == code, error
    assert set(error) >= {"type", "code", "message", "param", "detail"}, error
    return dict(error)


def state(client: httpx.Client) -> Any:
    """Everything the client can read, for "the store is unchanged" comparisons: every
    readable memory and every version of every record in it."""
    roots = ok(client.get("/v1/memories", params={"limit": 200}))["data"]
    seen: list[Any] = []
    for root in roots:
        below = ok(client.get("/v1/memories", params={"ancestor": root["id"], "limit": 200}))
        for memory in [root, *below["data"]]:
            records = ok(client.get(f"/v1/memories/{memory['id']}/records",
                                    params={"include": "all", "limit": 200}))["data"]
            histories = [ok(client.get(f"/v1/memories/{memory['id']}/records/{r['id']}/history"))
                         for r in records]
            seen.append({"memory": memory, "records": records, "histories": histories})
    return sorted(seen, key=lambda m: m["memory"]["id"])
