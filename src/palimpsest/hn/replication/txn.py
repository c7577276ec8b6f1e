"""Crash safety for replication: the sync lock, transaction records, leftover recovery and the
test-only kill hook.

Accepted refs move only in one ``git update-ref --stdin`` transaction, which Git aborts if the
process dies before *commit*.  Before promotion a record ``transactions/<txn>.json`` (status
``pending``) names every planned update; after commit it says ``committed``.  The next sync, under
the exclusive lock, deletes every leftover quarantine (they never hold accepted data) and settles
any ``pending`` record by reading the refs (all new heads: ``committed``; otherwise ``aborted``).

``PAL_TEST_SYNC_KILL_AT=<phase>`` makes the process SIGKILL itself when it reaches that phase; it
exists for the crash-consistency tests and has no other effect.
"""

from __future__ import annotations

import fcntl
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from palimpsest import canonical
from palimpsest.errors import Conflict, PalError
from palimpsest.hn.replication import transport as rgit
from palimpsest.hn.replication.selection import ensure_private_dir

KILL_ENV = "PAL_TEST_SYNC_KILL_AT"
PHASES = (
    "locked",  # lock held, leftovers cleaned
    "advertised",  # remote refs listed
    "quarantined",  # fresh quarantine repository created
    "fetched",  # selected streams fetched into quarantine
    "measured",  # budgets checked
    "validated",  # reader + projection checks done
    "recorded",  # pending transaction record written
    "copied",  # objects of promotable streams copied into the main store
    "prepared",  # ref transaction prepared (locks held), not committed
    "committed",  # ref transaction committed, quarantine not yet removed
    "published",  # local memory refs pushed
)


def checkpoint(phase: str) -> None:
    """Test hook: SIGKILL this process when ``PAL_TEST_SYNC_KILL_AT`` names ``phase``."""
    if os.environ.get(KILL_ENV) == phase:
        os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def sync_lock(git_dir: Path, directory: Path | None = None) -> Iterator[None]:
    """Hold ``<git-dir>/hn/replication/sync.lock`` (or ``<directory>/sync.lock``: a service
    import's) exclusively (released if the process dies).

    Raises:
        Conflict: code ``sync-running`` when another sync holds it.
    """
    directory = directory or rgit.replication_dir(git_dir)
    ensure_private_dir(directory)
    fd = os.open(directory / "sync.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise Conflict(
                "another sync is running here (or an import)",
                code="sync-running",
                hint="wait for it to finish, then run pal sync again",
            ) from exc
        yield
    finally:
        os.close(fd)


def transactions_dir(git_dir: Path) -> Path:
    return rgit.replication_dir(git_dir) / "transactions"


def write_private(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def transaction_doc(txn: str, remote: str, status: str,
                     updates: list[rgit.RefUpdate]) -> bytes:  # fmt: skip
    return canonical.encode_indent(
        {
            "version": 1,
            "transaction": txn,
            "remote": remote,
            "status": status,
            "updates": [{"ref": u.ref, "old": u.old, "new": u.new} for u in updates],
        }
    )


def recover_leftovers(git_dir: Path) -> list[str]:
    """Clean what an interrupted sync left behind; return a line per thing recovered.

    Quarantines are deleted (they never hold accepted data).  A pending transaction record is
    settled by looking at the refs: Git's transaction is all-or-nothing, so the refs either all
    hold the new heads (committed) or none does (aborted).
    """
    notes = [f"removed quarantine {name}" for name in rgit.remove_quarantines(git_dir)]
    directory = transactions_dir(git_dir)
    if not directory.is_dir():
        return notes
    for path in sorted(directory.glob("*.json")):
        try:
            doc = canonical.decode(path.read_bytes(), trailing_whitespace=True)
            if not isinstance(doc, dict) or doc.get("status") != "pending":
                continue
            updates = [
                rgit.RefUpdate(ref=u["ref"], new=u["new"], old=u["old"]) for u in doc["updates"]
            ]
            heads = [rgit.resolve_ref(git_dir, u.ref) for u in updates]
            done = all(h == u.new for h, u in zip(heads, updates, strict=True))
            status = "committed" if done else "aborted"
            write_private(path, transaction_doc(str(doc["transaction"]), str(doc["remote"]),
                                                  status, updates))  # fmt: skip
            notes.append(f"transaction {doc['transaction']} was {status}")
        except (PalError, KeyError, TypeError, OSError):
            path.unlink()
            notes.append(f"removed unreadable transaction record {path.name}")
    return notes


__all__ = [
    "KILL_ENV",
    "PHASES",
    "checkpoint",
    "recover_leftovers",
    "sync_lock",
    "transaction_doc",
    "transactions_dir",
    "write_private",
]
