"""Limits per credential: request rate, concurrent requests and bytes written per minute.

One :class:`Limiter` per server process holds, for each credential (or, where no credential id
is known, the member), a token bucket of requests, the number of its requests in flight and the
bytes its writes carried in the current minute. The faces ask it **before any work** — the HTTP
guard before it reads a body (bytes once the body is in, before the route runs), the MCP
dispatcher before a tool runs — so a refusal never drops work already acknowledged: the
request is answered ``429`` with ``Retry-After`` (HTTP) or a tool error naming the limit
(MCP), and nothing was written.

Why these defaults (:class:`LimitConfig`): every facade call runs on the one service thread,
so what one agent can cost another is its share of the queue in front of that thread. Sixteen
requests in flight per credential bound that share whatever the agent sends (concurrent
remembers of one credential are committed together, so sixteen of them cost about one group
commit); 256 MiB written a minute stops a runaway loop from filling the disk. The request rate
is off by default (a fast honest client, e.g. an import, is not throttled) and set with
``requests_per_second``/``rate_burst``. ``bench/limits.py`` measures another credential's
recall while 16 clients of one credential flood the server, against the same recall alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from palimpsest.errors import LimitExceeded

WINDOW_SECONDS: Final = 60.0
MAX_KEYS: Final = 100_000  # credentials tracked at once; idle ones are forgotten beyond this


@dataclass(frozen=True, slots=True)
class LimitConfig:
    """The limits of one credential (0 turns a limit off)."""

    requests_per_second: float = 0.0  # off by default; an operator sets it (pal serve)
    burst: int = 100
    concurrent_requests: int = 16
    write_bytes_per_minute: int = 256 << 20


@dataclass(slots=True)
class _State:
    tokens: float
    stamp: float
    in_flight: int = 0
    window: float = 0.0
    written: int = 0
    last: float = field(default=0.0)


class Ticket:
    """One admitted request; :meth:`release` when it is answered (idempotent)."""

    __slots__ = ("_key", "_limiter", "_released")

    def __init__(self, limiter: Limiter, key: str) -> None:
        self._limiter = limiter
        self._key = key
        self._released = False

    def charge(self, written: int) -> None:
        """Count ``written`` bytes of this request's body against the minute's allowance.

        Raises:
            LimitExceeded: over ``write_bytes_per_minute`` (the ticket is released).
        """
        try:
            self._limiter.charge(self._key, written)
        except LimitExceeded:
            self.release()
            raise

    def release(self) -> None:
        """The request is answered: it no longer counts as in flight."""
        if not self._released:
            self._released = True
            self._limiter.leave(self._key)


class Limiter:
    """The per-credential state of one process (thread-safe; no I/O)."""

    def __init__(self, config: LimitConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self._states: dict[str, _State] = {}
        self._lock = threading.Lock()

    def admit(self, key: str) -> Ticket:
        """Admit one request of ``key`` (rate and concurrency), or refuse it.

        Raises:
            LimitExceeded: ``concurrent_requests`` or ``requests_per_second``, with how long
                to wait.
        """
        c = self.config
        with self._lock:
            now = self._clock()
            state = self._state(key, now)
            if c.concurrent_requests and state.in_flight >= c.concurrent_requests:
                raise LimitExceeded(
                    f"this credential already has {state.in_flight} requests in flight "
                    f"(limit concurrent_requests = {c.concurrent_requests})",
                    limit="concurrent_requests", retry_after=1.0,
                    hint="wait for an answer before sending the next request")
            if c.requests_per_second:
                state.tokens = min(float(c.burst or 1), state.tokens
                                   + (now - state.stamp) * c.requests_per_second)
                state.stamp = now
                if state.tokens < 1.0:
                    wait = (1.0 - state.tokens) / c.requests_per_second
                    raise LimitExceeded(
                        f"this credential is over requests_per_second = "
                        f"{c.requests_per_second:g} (bursts of {c.burst})",
                        limit="requests_per_second", retry_after=wait,
                        hint="slow down and retry after the Retry-After time")
                state.tokens -= 1.0
            state.in_flight += 1
            state.last = now
        return Ticket(self, key)

    def charge(self, key: str, written: int) -> None:
        """Count ``written`` bytes of ``key``'s current minute (see :meth:`Ticket.charge`)."""
        limit = self.config.write_bytes_per_minute
        if not limit or written <= 0:
            return
        with self._lock:
            now = self._clock()
            state = self._state(key, now)
            if now - state.window >= WINDOW_SECONDS:
                state.window, state.written = now, 0
            if state.written + written > limit:
                raise LimitExceeded(
                    f"this credential wrote {state.written} bytes this minute; {written} more "
                    f"would pass write_bytes_per_minute = {limit}",
                    limit="write_bytes_per_minute",
                    retry_after=WINDOW_SECONDS - (now - state.window),
                    hint="write less, or wait for the next minute")
            state.written += written

    def leave(self, key: str) -> None:
        """One request of ``key`` was answered."""
        with self._lock:
            state = self._states.get(key)
            if state is not None and state.in_flight > 0:
                state.in_flight -= 1

    def in_flight(self, key: str) -> int:
        """Requests of ``key`` admitted and not yet answered."""
        with self._lock:
            state = self._states.get(key)
            return state.in_flight if state is not None else 0

    def _state(self, key: str, now: float) -> _State:
        state = self._states.get(key)
        if state is None:
            if len(self._states) >= MAX_KEYS:  # forget idle credentials (their buckets are full)
                for idle in [k for k, s in self._states.items() if s.in_flight == 0]:
                    del self._states[idle]
            state = self._states[key] = _State(tokens=float(self.config.burst or 1), stamp=now,
                                               window=now, last=now)
        return state


__all__ = ["LimitConfig", "Limiter", "Ticket"]
