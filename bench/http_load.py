"""A lean HTTP/1.1 load generator for ``remember`` (or ``recall``): keep-alive sockets, one
request in flight on each, driven by one ``selectors`` loop in its own process.

Usage (``bench/service.py`` starts it as a subprocess)::

    .venv/bin/python bench/http_load.py URL TOKEN MEMORY_ID --clients 8 --writes 2000 --seed 1
    .venv/bin/python bench/http_load.py URL TOKEN MEMORY_ID --clients 8 --writes 2000 \
        --recall QUERIES.json   # recalls instead: {"text": query, "limit": 8}, queries cycled

With ``--recall`` the line also holds each request's latency (send to last byte) as p50/p99.

A load generator that is itself the bottleneck measures the client, not the server: httpx
clients in threads cost about as much CPU per request as the server does, on the same two
cores. Here every request is pre-built bytes (a distinct ``Idempotency-Key`` and 20-word
content each) and a response is framed by its ``Content-Length`` only, so a request costs the
client a few tens of microseconds. Every response must be ``200`` with a JSON record body, or
the run fails. Prints one JSON line: writes, seconds, client CPU seconds, failures.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import selectors
import socket
import sys
import time
from urllib.parse import urlsplit

VOCAB = 20_000
_CUM = list(itertools.accumulate(1 / (i + 1) for i in range(VOCAB)))  # Zipf-like words


def _requests(host: str, path: str, token: str, count: int, *, rng: random.Random,
              tag: str) -> list[bytes]:
    out = []
    for n in range(count):
        text = " ".join(f"w{i}" for i in rng.choices(range(VOCAB), cum_weights=_CUM, k=20))
        body = json.dumps({"content": text}).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
                f"Idempotency-Key: load-{tag}-{n}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n")
        out.append(head.encode("latin-1") + body)
    return out


def _recalls(host: str, path: str, token: str, queries: list[str], *, count: int,
             offset: int) -> list[bytes]:
    out = []
    for n in range(count):
        body = json.dumps({"text": queries[(offset + n) % len(queries)], "limit": 8}).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        out.append(head.encode("latin-1") + body)
    return out


class _Conn:
    """One keep-alive connection with at most one request in flight."""

    def __init__(self, address: tuple[str, int], queue: list[bytes]) -> None:
        self.sock = socket.create_connection(address)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.queue = queue
        self.buf = b""
        self.done = 0
        self.sent_at = 0.0
        self.latencies: list[float] = []

    def send_next(self) -> bool:
        if not self.queue:
            return False
        self.sent_at = time.perf_counter()
        self.sock.sendall(self.queue.pop())  # small requests: the socket buffer takes them
        return True

    def feed(self, data: bytes) -> bool:
        """Take bytes; True when a whole response has arrived (checked: 200)."""
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return False
        head = self.buf[:end].decode("latin-1")
        length = None
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if length is None:
            raise SystemExit(f"response without Content-Length: {head[:200]!r}")
        if len(self.buf) < end + 4 + length:
            return False
        status = head.split(" ", 2)[1]
        body = self.buf[end + 4:end + 4 + length]
        if status != "200" or not body.startswith(b"{"):
            raise SystemExit(f"request failed: {status} {body[:200]!r}")
        self.latencies.append((time.perf_counter() - self.sent_at) * 1000)
        self.buf = self.buf[end + 4 + length:]
        self.done += 1
        return True


def run(url: str, token: str, memory_id: str, *, clients: int, writes: int, seed: int,
        recall: list[str] | None = None) -> dict[str, float | int]:
    """Send ``writes`` remembers (or recalls of ``recall``'s queries) over ``clients``
    connections; returns timings."""
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1", parts.port or 80)
    rng = random.Random(seed)
    per = writes // clients
    tag = f"{seed}-{time.time_ns()}"
    if recall is not None:
        path = f"/v1/memories/{memory_id}/recall"
        conns = [_Conn(address, _recalls(parts.netloc, path, token, recall, count=per,
                                                  offset=i * per))
                 for i in range(clients)]
    else:
        path = f"/v1/memories/{memory_id}/records"
        conns = [_Conn(address, _requests(parts.netloc, path, token, per, rng=rng,
                                          tag=f"{tag}-{i}")) for i in range(clients)]
    sel = selectors.DefaultSelector()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for c in conns:
        c.send_next()
        sel.register(c.sock, selectors.EVENT_READ, c)
    active = len(conns)
    while active:
        for key, _ in sel.select():
            conn: _Conn = key.data
            data = conn.sock.recv(65536)
            if not data:
                raise SystemExit("the server closed a connection")
            if conn.feed(data) and not conn.send_next():
                sel.unregister(conn.sock)
                active -= 1
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    for c in conns:
        c.sock.close()
    out: dict[str, float | int] = {"writes": per * clients, "seconds": elapsed,
                                   "client_cpu_s": cpu, "clients": clients}
    if recall is not None:
        lat = sorted(x for c in conns for x in c.latencies)
        out["p50_ms"] = round(lat[len(lat) // 2], 2)
        out["p99_ms"] = round(lat[min(len(lat) - 1, int(0.99 * len(lat)))], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("memory_id")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--recall", default=None,
                        help="a JSON file of query texts: send recalls instead of remembers")
    args = parser.parse_args()
    queries = None
    if args.recall is not None:
        with open(args.recall, encoding="utf-8") as f:
            queries = [str(q) for q in json.load(f)]
    sys.stdout.write(json.dumps(run(args.url, args.token, args.memory_id, clients=args.clients,
                                    writes=args.writes, seed=args.seed, recall=queries))
                     + "\n")


if __name__ == "__main__":
    main()
