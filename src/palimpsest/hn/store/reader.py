"""The verified stream reader of ``hn-memory/0`` (hn-memory-v0.md §11).

Every commit of a stream is checked (exact two-entry tree, blob bounds, strict canonical
payload, signature encoding, key, Ed25519), then continuity (single parents, sequence 1..n,
``previous``, the ref's owner and stream).  Reading never changes a ref; every failure is raised
before anything is returned, so one bad stream fails the whole collection (fail closed).
It takes a ``pygit2.Repository`` (bare or not, a quarantine included) and never assumes a work
tree.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pygit2

from palimpsest.errors import InvalidInput
from palimpsest.hn.envelope import (
    MAX_PAYLOAD_BYTES,
    MAX_SIGNATURE_BYTES,
    SIGNATURE_FAILED,
    Envelope,
    VerifiedMemory,
    decode_envelope,
    memory_id,
    signature_material,
    signature_valid,
)
from palimpsest.hn.store.refs import MemoryRef, list_memory_refs
from palimpsest.hn.store.sigpool import DeferredSignatures, worker_count

_BLOB_MODE = 0o100644
_OBJ_COMMIT = pygit2.enums.ObjectType.COMMIT
_OBJ_BLOB = pygit2.enums.ObjectType.BLOB
_OBJ_TREE = pygit2.enums.ObjectType.TREE


def corrupt(ref: str, commit: str, why: str) -> InvalidInput:
    """``invalid-memory-stream`` naming the ref, commit and rule."""
    # Names the ref, commit and rule; never echoes payload bytes (§24 item 13).
    return InvalidInput(
        f"memory stream {ref} is invalid at commit {commit}: {why}", code="invalid-memory-stream"
    )


def _read_blob(repo: pygit2.Repository, oid: Any, limit: int, ref: str, commit: str) -> bytes:
    # One read, bound checked afterwards: a separate header read doubles the object-store work
    # of the reader's hot path.  Replication measures object sizes in quarantine before this
    # loader runs, so remote data cannot make it inflate an oversized blob.
    try:
        kind, data = repo.odb.read(oid)
    except (KeyError, pygit2.GitError) as exc:
        raise corrupt(ref, commit, "blob object is missing") from exc
    if kind != _OBJ_BLOB:
        raise corrupt(ref, commit, "tree entry is not a blob")
    if len(data) > limit:
        raise corrupt(ref, commit, f"blob exceeds {limit} bytes")
    return data


def _checked_at(
    repo: pygit2.Repository, commit: pygit2.Commit, ref: str, hexid: str
) -> tuple[bytes, str, Envelope, bytes, bytes]:
    """Check one memory commit's tree, payload, signature encoding and key (§11, per commit):
    everything but the Ed25519 arithmetic, whose inputs (raw key, raw signature) it returns."""
    # Fast path: the only acceptable tree object is byte-for-byte the two 100644 entries in Git
    # order, so compare its raw bytes instead of walking parsed entries.
    tree_id = commit.tree_id
    width = len(tree_id.raw)
    try:
        kind, raw = repo.odb.read(tree_id)
    except (KeyError, pygit2.GitError) as exc:
        raise corrupt(ref, hexid, "tree object is missing") from exc
    if kind != _OBJ_TREE:
        raise corrupt(ref, hexid, "tree must hold exactly memory.json and signature")
    split = len(_ENTRY_PAYLOAD) + width
    if (
        len(raw) == split + len(_ENTRY_SIGNATURE) + width
        and raw.startswith(_ENTRY_PAYLOAD)
        and raw[split : split + len(_ENTRY_SIGNATURE)] == _ENTRY_SIGNATURE
    ):
        payload_id = pygit2.Oid(raw[len(_ENTRY_PAYLOAD) : split])
        signature_id = pygit2.Oid(raw[-width:])
    else:
        payload_id, signature_id = _diagnose_tree(commit, ref, hexid)
    payload = _read_blob(repo, payload_id, MAX_PAYLOAD_BYTES, ref, hexid)
    sig_bytes = _read_blob(repo, signature_id, MAX_SIGNATURE_BYTES, ref, hexid)
    try:
        envelope = decode_envelope(payload)
        signature = sig_bytes.decode("ascii")
    except InvalidInput as exc:
        raise corrupt(ref, hexid, exc.message) from exc
    except UnicodeDecodeError as exc:
        raise corrupt(ref, hexid, "invalid signature encoding") from exc
    try:
        raw_key, raw_sig = signature_material(envelope, signature)
    except InvalidInput as exc:
        raise corrupt(ref, hexid, exc.message) from exc
    return payload, signature, envelope, raw_key, raw_sig


def check_commit(
    repo: pygit2.Repository, commit: pygit2.Commit, ref: str, hexid: str
) -> tuple[bytes, str, Envelope]:
    """Check one memory commit's tree, payload and signature (§11, per commit)."""
    payload, signature, envelope, raw_key, raw_sig = _checked_at(repo, commit, ref, hexid)
    if not signature_valid(raw_key, raw_sig, payload):
        raise corrupt(ref, hexid, SIGNATURE_FAILED)
    return payload, signature, envelope


_ENTRY_PAYLOAD = b"100644 memory.json\x00"
_ENTRY_SIGNATURE = b"100644 signature\x00"


def _diagnose_tree(commit: pygit2.Commit, ref: str, hexid: str) -> tuple[Any, Any]:
    """Explain why a tree is not the exact two-entry memory tree (always raises)."""
    tree = commit.tree
    if len(tree) != 2:
        raise corrupt(ref, hexid, "tree must hold exactly memory.json and signature")
    payload_id = signature_id = None
    for entry in tree:
        if entry.filemode != _BLOB_MODE:
            raise corrupt(ref, hexid, "tree entries must be mode 100644 blobs")
        if entry.name == "memory.json" and payload_id is None:
            payload_id = entry.id
        elif entry.name == "signature" and signature_id is None:
            signature_id = entry.id
        else:
            raise corrupt(ref, hexid, "tree must hold exactly memory.json and signature")
    # Parsed entries looked right but the raw bytes did not (e.g. a zero-padded mode).
    raise corrupt(ref, hexid, "tree must hold exactly memory.json and signature")


def lookup_commit(repo: pygit2.Repository, oid: Any, ref: str) -> pygit2.Commit:
    """The commit ``oid`` of stream ``ref``; a missing object or another kind is corrupt."""
    try:
        obj = repo[oid]
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise corrupt(ref, str(oid), "commit object is missing") from exc
    if obj.type != _OBJ_COMMIT:
        raise corrupt(ref, str(oid), "object is not a commit")
    return obj  # type: ignore[return-value]


def _verify_chain(
    repo: pygit2.Repository,
    ref: MemoryRef,
    chain: list[pygit2.Commit],
    first_position: int,
    previous: str,
    *,
    checks: DeferredSignatures | None = None,
) -> tuple[VerifiedMemory, ...]:
    """Check each commit (tree, payload, signature) and the continuity rules of §11.

    With ``checks``, the Ed25519 arithmetic is deferred to it (in this order, so the same
    failure wins); the caller settles it (``finish``) before trusting the result.
    """
    out: list[VerifiedMemory] = []
    name = ref.name
    for position, commit in enumerate(chain, start=first_position):
        hexid = str(commit.id)
        payload, signature, envelope, raw_key, raw_sig = _checked_at(repo, commit, name, hexid)
        if checks is None:
            if not signature_valid(raw_key, raw_sig, payload):
                raise corrupt(name, hexid, SIGNATURE_FAILED)
        else:
            checks.add(raw_key, raw_sig, payload, (name, hexid))
            failed = checks.failure()
            if failed is not None:
                raise corrupt(failed[0], failed[1], SIGNATURE_FAILED)
        if envelope.actor != ref.actor or envelope.stream != ref.stream:
            raise corrupt(name, hexid, "actor or stream does not match the ref owner")
        if envelope.sequence != position:
            raise corrupt(name, hexid, f"sequence {envelope.sequence} at position {position}")
        if envelope.previous != previous:
            raise corrupt(name, hexid, "previous does not name the preceding memory")
        previous = memory_id(payload)
        out.append(VerifiedMemory(previous, hexid, payload, envelope, signature, name))
    return tuple(out)


def _walk(repo: pygit2.Repository, ref: MemoryRef, max_entries: int | None) -> list[pygit2.Commit]:
    """The commits of one stream from its root to its head (single parents only)."""
    chain: list[pygit2.Commit] = []
    oid: Any = pygit2.Oid(hex=ref.head)
    while True:
        commit = lookup_commit(repo, oid, ref.name)
        chain.append(commit)
        if max_entries is not None and len(chain) > max_entries:
            raise corrupt(ref.name, str(oid), f"stream exceeds {max_entries} entries")
        parents = commit.parent_ids
        if not parents:
            break
        if len(parents) > 1:
            raise corrupt(ref.name, str(oid), "merge commit: exactly one parent is allowed")
        oid = parents[0]
    chain.reverse()
    return chain


def load_stream(
    repo: pygit2.Repository, ref: MemoryRef, *, max_entries: int | None = None
) -> tuple[VerifiedMemory, ...]:
    """Fully verify one stream from its head (§11): every commit, then continuity.

    Returns the memories in sequence order.  ``max_entries`` bounds the walk (replication).

    Raises:
        InvalidInput: ``invalid-memory-stream`` naming the ref, commit and rule.
    """
    return _verify_chain(repo, ref, _walk(repo, ref, max_entries), 1, "")


def load_streams(
    repo: pygit2.Repository, refs: Iterable[MemoryRef], *, workers: int | None = None
) -> list[tuple[VerifiedMemory, ...]]:
    """Fully verify several streams, in order; the same result and the same first error as
    :func:`load_stream` on each in turn.

    Large reads hand the Ed25519 arithmetic to worker processes
    (:mod:`palimpsest.hn.store.sigpool`; ``workers`` None = automatic, 0 = none) while this process
    makes every other check.

    Raises:
        InvalidInput: ``invalid-memory-stream`` naming the ref, commit and rule.
    """
    chains: list[tuple[MemoryRef, list[pygit2.Commit]]] = []
    walk_error: InvalidInput | None = None
    for ref in refs:
        try:
            chains.append((ref, _walk(repo, ref, None)))
        except InvalidInput as exc:  # raised after the streams before it are verified
            walk_error = exc
            break
    count = worker_count(sum(len(c) for _r, c in chains)) if workers is None else workers
    if count <= 0:
        streams = [_verify_chain(repo, ref, chain, 1, "") for ref, chain in chains]
    else:
        with DeferredSignatures(count) as checks:
            try:
                streams = [_verify_chain(repo, ref, c, 1, "", checks=checks) for ref, c in chains]
            except InvalidInput as exc:
                failed = checks.finish()  # an earlier bad signature is the sequential error
                if failed is not None:
                    raise corrupt(failed[0], failed[1], SIGNATURE_FAILED) from exc
                raise
            failed = checks.finish()
            if failed is not None:
                raise corrupt(failed[0], failed[1], SIGNATURE_FAILED)
    if walk_error is not None:
        raise walk_error
    return streams


def load_stream_since(
    repo: pygit2.Repository, ref: MemoryRef, known_head: str, known_count: int, known_last: str
) -> tuple[VerifiedMemory, ...] | None:
    """Verify only the commits a stream gained since ``known_head`` (the incremental index).

    ``known_count`` and ``known_last`` are the sequence and memory ID of ``known_head``, taken
    from an earlier full verification.  Returns the new memories in sequence order, or None when
    ``known_head`` is not an ancestor of the ref head (the stream was rewritten: verify it all).

    Raises:
        InvalidInput: ``invalid-memory-stream`` as :func:`load_stream` does.
    """
    chain: list[pygit2.Commit] = []
    oid: Any = pygit2.Oid(hex=ref.head)
    while str(oid) != known_head:
        commit = lookup_commit(repo, oid, ref.name)
        chain.append(commit)
        parents = commit.parent_ids
        if not parents:
            return None
        if len(parents) > 1:
            raise corrupt(ref.name, str(oid), "merge commit: exactly one parent is allowed")
        oid = parents[0]
    chain.reverse()
    return _verify_chain(repo, ref, chain, known_count + 1, known_last)


def collect_from(
    streams: Iterable[tuple[VerifiedMemory, ...]],
) -> tuple[VerifiedMemory, ...]:
    """Merge verified streams: de-duplicate by memory ID keeping the smallest commit ID, and
    sort by (actor, stream, sequence, memory ID) (§11)."""
    best: dict[str, VerifiedMemory] = {}
    for stream in streams:
        for memory in stream:
            seen = best.get(memory.memory_id)
            if seen is None or memory.commit < seen.commit:
                best[memory.memory_id] = memory
    return tuple(
        sorted(
            best.values(),
            key=lambda m: (m.envelope.actor, m.envelope.stream, m.envelope.sequence, m.memory_id),
        )
    )


def collect(repo: pygit2.Repository, *, workers: int | None = None) -> tuple[VerifiedMemory, ...]:
    """Load and verify every local and accepted stream; one bad stream fails all (§11).

    ``workers`` as for :func:`load_streams`.
    """
    return collect_from(load_streams(repo, list_memory_refs(repo), workers=workers))


__all__ = [
    "check_commit",
    "collect",
    "collect_from",
    "corrupt",
    "load_stream",
    "load_stream_since",
    "load_streams",
    "lookup_commit",
]
