"""Deferred Ed25519 checks for the repo-memory reader, run in worker processes.

The reader (:mod:`palimpsest.hn.store`) makes every check of hn-memory-v0.md §11 itself, in
order, except the curve arithmetic of each signature, which it hands to
:class:`DeferredSignatures`: batches go to a few ``python -m palimpsest.hn.store.sigworker``
children while the reader reads and decodes the next memories.  The outcome never depends on timing:

- every signature is verified exactly once before the reader returns anything;
- a ``0`` verdict is re-checked in the reader's own process, and only that check can fail a
  memory; the failure reported is the earliest in reader order, so the error equals the one a
  sequential reader raises (:meth:`DeferredSignatures.failure`);
- a worker that cannot start, dies or closes its pipe loses nothing: its batches are verified
  in process;
- when every worker is busy the reader verifies the batch itself instead of waiting.

Bounds: at most ``workers`` children (auto: one fewer than the usable CPUs, at most
:data:`MAX_AUTO_WORKERS`, and only for at least :data:`MIN_POOL_MEMORIES` memories), at most
:data:`MAX_OUTSTANDING` batches of at most :data:`BATCH` items and about :data:`BATCH_BYTES`
bytes in flight per child.  ``PAL_VERIFY_WORKERS``
(an integer ≥ 0) overrides the automatic choice; ``0`` keeps all verification in process.

POSIX only (readiness is polled with ``select`` on the pipes); elsewhere the count is 0.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections import deque
from pathlib import Path
from types import TracebackType
from typing import Any

from palimpsest.hn.envelope import signature_valid
from palimpsest.hn.store.sigworker import HEADER, ITEM

MIN_POOL_MEMORIES = 2048
MAX_AUTO_WORKERS = 2
MAX_WORKERS = 8
BATCH = 32
# Two unread batches must fit in a pipe (64 KiB on Linux), or the reader blocks on a write
# while it could be decoding; a single larger payload still goes, as a batch of its own.
BATCH_BYTES = 24 * 1024
MAX_OUTSTANDING = 2
WORKER_COMMAND = ("-m", "palimpsest.hn.store.sigworker")

# (raw key, raw signature, payload, caller's tag, position in reader order)
_Item = tuple[bytes, bytes, bytes, Any, int]


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def worker_count(memories: int) -> int:
    """How many worker processes a reader of ``memories`` memories uses (see module doc)."""
    if os.name != "posix" or not sys.executable:
        return 0
    configured = os.environ.get("PAL_VERIFY_WORKERS", "").strip()
    if configured:
        try:
            return max(0, min(int(configured), MAX_WORKERS))
        except ValueError:
            return 0
    if memories < MIN_POOL_MEMORIES or not Path(sys.executable).name.startswith("python"):
        return 0
    return max(0, min(_usable_cpus() - 1, MAX_AUTO_WORKERS))


def _frame(batch: list[_Item]) -> bytes:
    parts = []
    size = 0
    for raw_key, raw_sig, payload, _tag, _pos in batch:
        parts.append(ITEM.pack(raw_key, raw_sig, len(payload)))
        parts.append(payload)
        size += ITEM.size + len(payload)
    return HEADER.pack(len(batch), size) + b"".join(parts)


class _Worker:
    """One child process and the batches it has been sent, oldest first."""

    def __init__(self, command: list[str]) -> None:
        self.batches: deque[list[_Item]] = deque()
        self.proc: subprocess.Popen[bytes] | None
        try:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError:
            self.proc = None

    @property
    def alive(self) -> bool:
        return self.proc is not None

    def send(self, batch: list[_Item]) -> bool:
        """Queue a batch on the child; False (and the child retired) when it cannot take it."""
        if self.proc is None or self.proc.stdin is None:
            return False
        try:
            self.proc.stdin.write(_frame(batch))
            self.proc.stdin.flush()
        except OSError:
            self.retire()
            return False
        self.batches.append(batch)
        return True

    def ready(self) -> bool:
        """Whether a verdict is waiting to be read (never blocks)."""
        if self.proc is None or self.proc.stdout is None or not self.batches:
            return False
        readable, _w, _x = select.select([self.proc.stdout.fileno()], [], [], 0)
        return bool(readable)

    def receive(self) -> tuple[list[_Item], bytes | None]:
        """The oldest batch and its verdicts (blocking); None when the child failed."""
        batch = self.batches.popleft()
        if self.proc is None or self.proc.stdout is None:
            return batch, None
        fd = self.proc.stdout.fileno()
        want = len(batch)
        got = b""
        try:
            while len(got) < want:
                chunk = os.read(fd, want - len(got))
                if not chunk:
                    break
                got += chunk
        except OSError:
            got = b""
        if len(got) != want:
            self.retire()
            return batch, None
        return batch, got

    def retire(self) -> None:
        """Stop the child; its unanswered batches stay queued for the reader to verify."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for pipe in (proc.stdin, proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class DeferredSignatures:
    """Ed25519 checks handed out to worker processes; use as a context manager.

    ``add`` queues one check with a caller tag; :meth:`failure` returns the tag of the earliest
    failed check once one is known; :meth:`finish` waits for everything and returns the same.
    """

    def __init__(
        self, workers: int, *, command: list[str] | None = None, batch: int | None = None
    ) -> None:
        self._command = command or [sys.executable, *WORKER_COMMAND]
        self._want = max(0, workers)
        self._workers: list[_Worker] = []
        self._batch_size = max(1, BATCH if batch is None else batch)
        self._pending: list[_Item] = []
        self._pending_bytes = 0
        self._position = 0
        self._failed: list[tuple[int, Any]] = []

    def __enter__(self) -> DeferredSignatures:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def add(self, raw_key: bytes, raw_sig: bytes, payload: bytes, tag: Any) -> None:
        """Queue the check of ``raw_sig`` over ``payload`` under ``raw_key``."""
        self._pending.append((raw_key, raw_sig, payload, tag, self._position))
        self._position += 1
        self._pending_bytes += ITEM.size + len(payload)
        if len(self._pending) >= self._batch_size or self._pending_bytes >= BATCH_BYTES:
            batch, self._pending, self._pending_bytes = self._pending, [], 0
            self._dispatch(batch)

    def failure(self) -> Any | None:
        """The tag of the earliest failed check in ``add`` order, once any failure is known
        (everything queued before it is then settled first); None while none is known."""
        if not self._failed:
            return None
        return self.finish()

    def finish(self) -> Any | None:
        """Settle every queued check; the tag of the earliest failure, or None."""
        batch, self._pending, self._pending_bytes = self._pending, [], 0
        self._check_here(batch)
        for worker in self._workers:
            while worker.batches:
                self._settle(*worker.receive())
        if not self._failed:
            return None
        return min(self._failed, key=lambda failed: failed[0])[1]

    def close(self) -> None:
        """Stop every worker (their input closes; they exit)."""
        for worker in self._workers:
            worker.retire()
        self._workers = []

    # -------------------------------------------------------------------- internals

    def _dispatch(self, batch: list[_Item]) -> None:
        if self._want and not self._workers:
            self._workers = [_Worker(self._command) for _ in range(self._want)]
        for worker in self._workers:
            while worker.ready():
                self._settle(*worker.receive())
        free = [w for w in self._workers if w.alive and len(w.batches) < MAX_OUTSTANDING]
        if free and min(free, key=lambda w: len(w.batches)).send(batch):
            return
        self._check_here(batch)  # every worker busy (or gone): do not wait for one

    def _settle(self, batch: list[_Item], verdicts: bytes | None) -> None:
        if verdicts is None:
            self._check_here(batch)
            return
        for item, ok in zip(batch, verdicts, strict=True):
            if not ok:
                self._check_here([item])  # only the reader's own check can fail a memory

    def _check_here(self, batch: list[_Item]) -> None:
        for raw_key, raw_sig, payload, tag, position in batch:
            if not signature_valid(raw_key, raw_sig, payload):
                self._failed.append((position, tag))


__all__ = ["MIN_POOL_MEMORIES", "DeferredSignatures", "worker_count"]
