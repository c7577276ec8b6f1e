"""Appending to a local memory stream (hn-memory-v0.md §9): the checked stream head, the Git
objects of one memory (byte-identical to ``git commit-tree``), and the compare-and-swap of the
stream ref.  A lost race writes no ref and says "reload and retry"."""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from pathlib import Path

import pygit2

from palimpsest.errors import Conflict, InvalidInput, Unavailable
from palimpsest.hn.envelope import Envelope, memory_id
from palimpsest.hn.store.reader import check_commit, corrupt
from palimpsest.hn.store.refs import local_ref_name, malformed_ref

CAS_FAILED = "compare-and-swap failed; reload and retry with a newly signed envelope"


@dataclass(frozen=True, slots=True)
class StreamHead:
    """Where the next entry of a local stream goes."""

    ref: str
    head: str | None  # expected old head for the compare-and-swap; None for a new stream
    sequence: int  # the next sequence number
    previous: str  # memory ID of the head entry, "" for a new stream


def stream_head(repo: pygit2.Repository, actor: str, stream: str) -> StreamHead:
    """Read the local stream head and check its newest entry (tree, payload, signature,
    owner), so an append never extends a corrupt or foreign head."""
    name = local_ref_name(actor, stream)
    ref = repo.references.get(name)
    if ref is None:
        return StreamHead(name, None, 1, "")
    if ref.type != pygit2.enums.ReferenceType.DIRECT:
        raise malformed_ref(name)
    head = str(ref.target)
    payload, _sig, envelope = check_commit(repo, head, name)
    if envelope.actor != actor or envelope.stream != stream:
        raise corrupt(name, head, "actor or stream does not match the ref owner")
    return StreamHead(name, head, envelope.sequence + 1, memory_id(payload))


_CRUD = frozenset(".,:;<>\"\\'")


def ident_name(name: str) -> str:
    """The ident name Git writes for ``name`` (``git commit-tree``): leading and trailing "crud"
    (controls, space and ``.,:;<>"\\'``) trimmed, then every ``<``, ``>`` and LF removed.

    Raises:
        InvalidInput: nothing is left (Git refuses an empty ident name).
    """
    start, end = 0, len(name)
    while start < end and (name[start] <= " " or name[start] in _CRUD):
        start += 1
    while end > start and (name[end - 1] <= " " or name[end - 1] in _CRUD):
        end -= 1
    trimmed = name[start:end].replace("<", "").replace(">", "").replace("\n", "")
    if not trimmed:
        raise InvalidInput("actor name cannot be written as a Git author", code="invalid-name")
    return trimmed


def commit_time(timestamp: str) -> tuple[int, int]:
    """Seconds since the epoch (fraction dropped) and offset in minutes of an RFC 3339 string."""
    date, _, rest = timestamp.partition("T")
    year, month, day = (int(x) for x in date.split("-"))
    hour, minute, second = int(rest[0:2]), int(rest[3:5]), int(rest[6:8])
    zone = rest[8:].split("Z")[0] if rest.endswith("Z") else rest[-6:]
    offset = 0
    if not rest.endswith("Z"):
        sign = -1 if zone[0] == "-" else 1
        offset = sign * (int(zone[1:3]) * 60 + int(zone[4:6]))
    epoch = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) - offset * 60
    return epoch, offset


def write_memory_objects(
    repo: pygit2.Repository,
    payload: bytes,
    signature: str,
    *,
    author: str,
    actor: str,
    timestamp: str,
    parent: str | None,
) -> str:
    """Write the two blobs, the two-entry tree and the commit (§9); return the commit ID.

    The commit is byte-identical to ``git commit-tree`` with the author/committer set to the
    actor's name and ``<first 12 hex>@hn.invalid`` at the envelope timestamp.
    """
    payload_id = repo.create_blob(payload)
    signature_id = repo.create_blob(signature.encode("ascii"))
    builder = repo.TreeBuilder()
    builder.insert("memory.json", payload_id, pygit2.enums.FileMode.BLOB)
    builder.insert("signature", signature_id, pygit2.enums.FileMode.BLOB)
    tree = builder.write()
    when, offset = commit_time(timestamp)
    person = pygit2.Signature(ident_name(author), f"{actor[:12]}@hn.invalid", when, offset)
    parents = [pygit2.Oid(hex=parent)] if parent else []
    oid = repo.create_commit(
        None, person, person, f"hn memory {memory_id(payload)}\n", tree, parents
    )
    return str(oid)


def compare_and_swap(repo: pygit2.Repository, ref: str, new: str, expected: str | None) -> None:
    """Move ``ref`` to ``new`` only if it still points at ``expected`` (absent when None).

    The ref is locked (libgit2 reference transaction, the same ``.lock`` file Git uses), its
    current target is read under the lock and compared, and only then written.  No reflog
    identity is passed: Git logs ``refs/hn/*`` only with ``core.logAllRefUpdates=always``, and
    libgit2 then falls back to the configured or an "unknown" identity.

    Raises:
        Conflict: ``cas-failed`` — another writer holds the lock or got there first; nothing
            was written.
        Unavailable: ``git-error`` — the ref could not be written for another reason.
    """
    lock = Path(repo.path) / (ref + ".lock")
    try:
        with repo.transaction() as txn:
            try:
                txn.lock_ref(ref)
            except pygit2.GitError as exc:
                raise Conflict(CAS_FAILED, code="cas-failed") from exc
            current = repo.references.get(ref)
            current_target = None if current is None else str(current.target)
            if current_target != expected:
                raise Conflict(CAS_FAILED, code="cas-failed")
            txn.set_target(ref, pygit2.Oid(hex=new), message="hn: append memory")
    except pygit2.GitError as exc:
        if lock.exists():  # a concurrent writer took the lock while we committed
            raise Conflict(CAS_FAILED, code="cas-failed") from exc
        raise Unavailable(f"cannot update {ref}: {exc}", code="git-error") from exc


def append_memory(
    repo: pygit2.Repository,
    payload: bytes,
    signature: str,
    envelope: Envelope,
    head: StreamHead,
) -> str:
    """Append a signed, validated entry to its local stream with compare-and-swap (§9).

    Raises:
        Conflict: the stream moved since ``head`` was read; reload and retry.
    """
    if envelope.sequence != head.sequence or envelope.previous != head.previous:
        raise Conflict(CAS_FAILED, code="cas-failed")
    commit = write_memory_objects(
        repo,
        payload,
        signature,
        author=envelope.actor_name,
        actor=envelope.actor,
        timestamp=envelope.timestamp,
        parent=head.head,
    )
    compare_and_swap(repo, head.ref, commit, head.head)
    return commit


__all__ = [
    "CAS_FAILED",
    "StreamHead",
    "append_memory",
    "commit_time",
    "compare_and_swap",
    "ident_name",
    "stream_head",
    "write_memory_objects",
]
