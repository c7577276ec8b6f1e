"""``pal serve --workers N``: N server processes over one listening socket and one store.

The supervisor is the process ``pal serve`` started. It does the one-time work first — opens
the store (creating or checking its schema), makes the first owner and the server's signing
key, binds the socket — and only then forks the workers, so nothing of it is ever raced. It
holds no store connection and no thread while it forks.

**One shared socket, not SO_REUSEPORT.** Every worker accepts from the same listening socket
(pre-fork). A worker that dies takes only the connections it had accepted; the connections
still queued stay in the one queue for the others. With ``SO_REUSEPORT`` each worker has a
queue of its own, the kernel resets the connections queued on a worker that dies, and the
kernel's hash — not load — picks the worker. The socket's backlog is set once, here; a
worker's event loop accepts one connection per wake-up (:class:`SharedListener`), so a burst of
new connections spreads over the workers instead of landing on whichever woke first.

**Supervision.** A worker that exits while the service runs — a crash, ``kill -9``, an
out-of-memory kill — is started again at once (after a pause growing to 10 s when workers keep
dying within a second of starting, so a broken configuration does not spin). ``SIGTERM`` or
``SIGINT`` stops the service: each worker stops accepting, finishes the requests it has in
flight (uvicorn's graceful shutdown) and exits; a worker still running after ``stop_seconds``
is killed; a second signal kills at once. Every worker asks the kernel for ``SIGTERM`` when
the supervisor dies, so a ``kill -9`` of the supervisor never leaves workers serving alone.

What the workers share is the store: every cross-process rule (one writer at a time with a
bounded wait, compare-and-swap ref advances, unique idempotency keys and merge nonces, the
principals generation every credential check reads) lives there, not here.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from palimpsest import canonical

__all__ = ["ACCEPT_BATCH", "SharedListener", "Supervisor"]

ACCEPT_BATCH: Final = 1  # connections a worker accepts per wake-up of its event loop
_SIGNALS: Final = (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT)
_FAST_DEATH: Final = 1.0  # a worker that dies sooner than this after starting counts as failing
_MAX_PAUSE: Final = 10.0
_PR_SET_PDEATHSIG: Final = 1

log = logging.getLogger("palimpsest.serve")


class SharedListener(socket.socket):
    """The listening socket as one worker holds it.

    The supervisor called ``listen()`` with the real backlog; a worker's event loop calls it
    again with the number of connections to accept per wake-up, which must not shrink the
    queue every worker shares, so here it does nothing."""

    def listen(self, backlog: int = 0) -> None:
        del backlog


@dataclass
class _Worker:
    index: int
    pid: int
    started: float


class Supervisor:
    """Forks ``count`` workers, each ``start(index)``, keeps them running, stops them."""

    def __init__(self, count: int, start: Callable[[int], None], *,
                 stop_seconds: float = 30.0) -> None:
        self.count = count
        self._start = start
        self._stop_seconds = stop_seconds
        self._workers: dict[int, _Worker] = {}  # by pid
        self._pause = 0.0
        self._pid = os.getpid()
        self._stopping = False

    def pids(self) -> list[int]:
        """The workers' process ids, by index."""
        return [w.pid for w in sorted(self._workers.values(), key=lambda w: w.index)]

    def start(self) -> None:
        """Fork every worker (signals the supervisor waits for are held from here on)."""
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        for index in range(self.count):
            self._spawn(index)

    def run(self) -> int:
        """Supervise until SIGTERM or SIGINT; returns the exit status (0: stopped)."""
        while True:
            info = signal.sigtimedwait(_SIGNALS, 1.0)
            self._reap()
            if info is not None and info.si_signo in (signal.SIGTERM, signal.SIGINT):
                self._stop()
                return 0
            self._refill()

    # --- workers ---------------------------------------------------------------------------
    def _spawn(self, index: int) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os._exit(self._child(index))
        self._workers[pid] = _Worker(index, pid, time.monotonic())
        return pid

    def _child(self, index: int) -> int:
        code = 1
        try:
            for sig in _SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
            _die_with(self._pid)
            self._start(index)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # the worker's last word, then its exit status says it failed
            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
        return code

    def _reap(self) -> None:
        """Collect every worker that exited; start each again unless the service stops."""
        while self._workers:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            worker = self._workers.pop(pid, None)
            if worker is None:
                continue
            lived = time.monotonic() - worker.started
            self._pause = min(max(self._pause * 2, 0.5), _MAX_PAUSE) if lived < _FAST_DEATH \
                else 0.0
            _event("worker-exit", worker=worker.index, pid=pid, status=_status(status),
                   seconds=round(lived, 3), level=logging.INFO if self._stopping
                   else logging.WARNING)

    def _refill(self) -> None:
        running = {w.index for w in self._workers.values()}
        missing = [i for i in range(self.count) if i not in running]
        if not missing:
            return
        if self._pause:
            time.sleep(self._pause)  # workers keep dying as they start: do not spin
        for index in missing:
            _event("worker-start", worker=index, pid=self._spawn(index))

    def _stop(self) -> None:
        self._stopping = True
        for pid in list(self._workers):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self._stop_seconds
        while self._workers:
            left = deadline - time.monotonic()
            info = signal.sigtimedwait(_SIGNALS, max(0.0, min(left, 1.0))) if left > 0 else None
            self._reap()
            again = info is not None and info.si_signo in (signal.SIGTERM, signal.SIGINT)
            if self._workers and (left <= 0 or again):
                for pid in list(self._workers):  # past the bound, or asked twice: now
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + self._stop_seconds


def _die_with(parent: int) -> None:
    """Ask for SIGTERM when the supervisor dies (Linux); exit now if it already has."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        raise SystemExit(0)


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit {os.waitstatus_to_exitcode(status)}"


def _event(name: str, *, level: int = logging.WARNING, **fields: object) -> None:
    """One JSON line on stderr (the service's log): what the supervisor did and why."""
    log.log(level, canonical.encode({"event": name, **fields}).decode())
