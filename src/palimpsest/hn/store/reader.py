"""The verified stream reader of ``hn-memory/0`` (hn-memory-v0.md §11).

Every commit of a stream is checked (exact two-entry tree, blob bounds, strict canonical
payload, signature encoding, key, Ed25519), then continuity (single parents, sequence 1..n,
``previous``, the ref's owner and stream).  Reading never changes a ref; every failure is raised
before anything is returned, so one bad stream fails the whole collection (fail closed).
It takes a ``pygit2.Repository`` (bare or not, a quarantine included) and never assumes a work
tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
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
from palimpsest.hn.store.objects import ObjectReader
from palimpsest.hn.store.refs import MemoryRef
from palimpsest.hn.store.repository import list_memory_refs
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


def _read_blob(reader: ObjectReader, oid: bytes, limit: int, ref: str, commit: str) -> bytes:
    # One read, bound checked afterwards: a separate header read doubles the object-store work
    # of the reader's hot path.  Replication measures object sizes in quarantine before this
    # loader runs, so remote data cannot make it inflate an oversized blob.
    try:
        kind, data = reader.read(oid)
    except (KeyError, pygit2.GitError) as exc:
        raise corrupt(ref, commit, "blob object is missing") from exc
    if kind != _OBJ_BLOB:
        raise corrupt(ref, commit, "tree entry is not a blob")
    if len(data) > limit:
        raise corrupt(ref, commit, f"blob exceeds {limit} bytes")
    return data


def _checked_at(
    repo: pygit2.Repository, reader: ObjectReader, tree_id: bytes, ref: str, hexid: str
) -> tuple[bytes, str, Envelope, bytes, bytes]:
    """Check one memory commit's tree, payload, signature encoding and key (§11, per commit):
    everything but the Ed25519 arithmetic, whose inputs (raw key, raw signature) it returns."""
    # Fast path: the only acceptable tree object is byte-for-byte the two 100644 entries in Git
    # order, so compare its raw bytes instead of walking parsed entries.
    width = len(tree_id)
    try:
        kind, raw = reader.read(tree_id)
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
        payload_id = raw[len(_ENTRY_PAYLOAD) : split]
        signature_id = raw[-width:]
    else:
        payload_id, signature_id = _diagnose_tree(repo, tree_id, ref, hexid)
    payload = _read_blob(reader, payload_id, MAX_PAYLOAD_BYTES, ref, hexid)
    sig_bytes = _read_blob(reader, signature_id, MAX_SIGNATURE_BYTES, ref, hexid)
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


def check_commit(repo: pygit2.Repository, hexid: str, ref: str) -> tuple[bytes, str, Envelope]:
    """Check one memory commit's tree, payload and signature (§11, per commit), reading the
    commit as the stream walk does (its author and committer are not checked)."""
    reader = ObjectReader(repo)
    tree_id, _parents = _commit_at(repo, reader, hexid, ref)
    payload, signature, envelope, raw_key, raw_sig = _checked_at(
        repo, reader, tree_id, ref, hexid
    )
    if not signature_valid(raw_key, raw_sig, payload):
        raise corrupt(ref, hexid, SIGNATURE_FAILED)
    return payload, signature, envelope


_ENTRY_PAYLOAD = b"100644 memory.json\x00"
_ENTRY_SIGNATURE = b"100644 signature\x00"


def _diagnose_tree(
    repo: pygit2.Repository, tree_id: bytes, ref: str, hexid: str
) -> tuple[bytes, bytes]:
    """Explain why a tree is not the exact two-entry memory tree (always raises)."""
    try:
        tree = repo[pygit2.Oid(tree_id)]
        entries = list(tree)  # type: ignore[call-overload]
    except pygit2.GitError as exc:  # libgit2 cannot parse the tree object's entries
        raise corrupt(ref, hexid, "tree object is malformed") from exc
    if len(entries) != 2:
        raise corrupt(ref, hexid, "tree must hold exactly memory.json and signature")
    payload_id = signature_id = None
    for entry in entries:
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


# One commit of a stream as the walk keeps it: its hex ID and its tree's binary ID.
_Link = tuple[str, bytes]


def _links(raw: bytes) -> tuple[bytes, list[str]] | None:
    """The tree (binary) and parent (hex) IDs at the head of a raw commit object, or None when
    the object does not start like one (libgit2 then parses it, to say why)."""
    if not raw.startswith(b"tree "):
        return None
    end = raw.find(b"\n", 5)
    try:
        tree = bytes.fromhex(raw[5:end].decode("ascii"))
        parents = []
        pos = end + 1
        while raw.startswith(b"parent ", pos):
            stop = raw.find(b"\n", pos)
            parent = raw[pos + 7 : stop].decode("ascii")
            bytes.fromhex(parent)
            parents.append(parent)
            pos = stop + 1
    except (ValueError, UnicodeDecodeError):
        return None
    if len(tree) not in (20, 32) or any(len(p) != 2 * len(tree) for p in parents):
        return None
    return tree, parents


def _commit_at(
    repo: pygit2.Repository, reader: ObjectReader, hexid: str, ref: str
) -> tuple[bytes, list[str]]:
    """The tree and parents of a stream's commit ``hexid``."""
    try:
        kind, raw = reader.read(bytes.fromhex(hexid))
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise corrupt(ref, hexid, "commit object is missing") from exc
    if kind != _OBJ_COMMIT:
        raise corrupt(ref, hexid, "object is not a commit")
    links = _links(raw)
    if links is None:
        commit = lookup_commit(repo, pygit2.Oid(hex=hexid), ref)
        return commit.tree_id.raw, [str(p) for p in commit.parent_ids]
    return links


def _verify_chain(  # noqa: PLR0917 - internal, the reader's loop
    repo: pygit2.Repository,
    reader: ObjectReader,
    ref: MemoryRef,
    chain: Sequence[_Link],
    first_position: int,
    previous: str,
    *,
    checks: DeferredSignatures | None = None,
) -> Iterator[VerifiedMemory]:
    """Check each commit (tree, payload, signature) and the continuity rules of §11, yielding
    each memory once every check but (with ``checks``) the deferred Ed25519 arithmetic passed.

    With ``checks``, the arithmetic is deferred to it (in this order, so the same failure
    wins); the caller settles it (``finish``) before trusting anything yielded.
    """
    name = ref.name
    for position, (hexid, tree_id) in enumerate(chain, start=first_position):
        payload, signature, envelope, raw_key, raw_sig = _checked_at(
            repo, reader, tree_id, name, hexid
        )
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
        yield VerifiedMemory(previous, hexid, payload, envelope, signature, name)


def _walk(
    repo: pygit2.Repository, reader: ObjectReader, ref: MemoryRef, max_entries: int | None
) -> list[_Link]:
    """The commits of one stream from its root to its head (single parents only)."""
    chain: list[_Link] = []
    hexid = ref.head
    while True:
        tree_id, parents = _commit_at(repo, reader, hexid, ref.name)
        chain.append((hexid, tree_id))
        if max_entries is not None and len(chain) > max_entries:
            raise corrupt(ref.name, hexid, f"stream exceeds {max_entries} entries")
        if not parents:
            break
        if len(parents) > 1:
            raise corrupt(ref.name, hexid, "merge commit: exactly one parent is allowed")
        hexid = parents[0]
    chain.reverse()
    return chain


@dataclass(frozen=True, slots=True)
class Walk:
    """The commit chains of several streams, root first, walked before any is verified.

    ``error`` is the walk failure of the stream after the last chain: it is raised once the
    streams before it are verified (so an earlier bad signature is the error, as when each
    stream is read in turn).
    """

    chains: tuple[tuple[MemoryRef, tuple[_Link, ...]], ...]
    error: InvalidInput | None

    @property
    def total(self) -> int:
        """How many commits the chains hold."""
        return sum(len(chain) for _ref, chain in self.chains)


def walk_streams(repo: pygit2.Repository, refs: Iterable[MemoryRef]) -> Walk:
    """Walk the commits of every stream in order, stopping at the first that fails."""
    reader = ObjectReader(repo)
    chains: list[tuple[MemoryRef, tuple[_Link, ...]]] = []
    for ref in refs:
        try:
            chains.append((ref, tuple(_walk(repo, reader, ref, None))))
        except InvalidInput as exc:
            return Walk(tuple(chains), exc)
    return Walk(tuple(chains), None)


def verify_walk(
    repo: pygit2.Repository, walk: Walk, *, workers: int | None = None
) -> Iterator[VerifiedMemory]:
    """Verify walked streams in order, yielding memories as they pass, in ref then sequence
    order; the same memories and the same first error as :func:`load_stream` on each stream in
    turn.

    Memories are yielded before their deferred Ed25519 check is settled: the iteration raises
    before it ends when any check fails, so trust nothing it yielded until it has ended (the
    index writes them to a temporary file it discards on failure).

    Large reads hand the Ed25519 arithmetic to worker processes
    (:mod:`palimpsest.hn.store.sigpool`; ``workers`` None = automatic, 0 = none) while this
    process makes every other check.

    Raises:
        InvalidInput: ``invalid-memory-stream`` naming the ref, commit and rule.
    """
    reader = ObjectReader(repo)
    count = worker_count(walk.total) if workers is None else workers
    if count <= 0:
        for ref, chain in walk.chains:
            yield from _verify_chain(repo, reader, ref, chain, 1, "")
    else:
        with DeferredSignatures(count) as checks:
            try:
                for ref, chain in walk.chains:
                    yield from _verify_chain(repo, reader, ref, chain, 1, "", checks=checks)
            except InvalidInput as exc:
                failed = checks.finish()  # an earlier bad signature is the sequential error
                if failed is not None:
                    raise corrupt(failed[0], failed[1], SIGNATURE_FAILED) from exc
                raise
            failed = checks.finish()
            if failed is not None:
                raise corrupt(failed[0], failed[1], SIGNATURE_FAILED)
    if walk.error is not None:
        raise walk.error


def load_stream(
    repo: pygit2.Repository, ref: MemoryRef, *, max_entries: int | None = None
) -> tuple[VerifiedMemory, ...]:
    """Fully verify one stream from its head (§11): every commit, then continuity.

    Returns the memories in sequence order.  ``max_entries`` bounds the walk (replication).

    Raises:
        InvalidInput: ``invalid-memory-stream`` naming the ref, commit and rule.
    """
    reader = ObjectReader(repo)
    return tuple(_verify_chain(repo, reader, ref, _walk(repo, reader, ref, max_entries), 1, ""))


def load_streams(
    repo: pygit2.Repository, refs: Iterable[MemoryRef], *, workers: int | None = None
) -> list[tuple[VerifiedMemory, ...]]:
    """Fully verify several streams, in order; the same result and the same first error as
    :func:`load_stream` on each in turn (``workers`` as for :func:`verify_walk`).

    Raises:
        InvalidInput: ``invalid-memory-stream`` naming the ref, commit and rule.
    """
    walk = walk_streams(repo, refs)
    found: dict[str, list[VerifiedMemory]] = {ref.name: [] for ref, _chain in walk.chains}
    for memory in verify_walk(repo, walk, workers=workers):
        found[memory.ref].append(memory)
    return [tuple(found[ref.name]) for ref, _chain in walk.chains]


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
    reader = ObjectReader(repo)
    chain: list[_Link] = []
    hexid = ref.head
    while hexid != known_head:
        tree_id, parents = _commit_at(repo, reader, hexid, ref.name)
        chain.append((hexid, tree_id))
        if not parents:
            return None
        if len(parents) > 1:
            raise corrupt(ref.name, hexid, "merge commit: exactly one parent is allowed")
        hexid = parents[0]
    chain.reverse()
    return tuple(_verify_chain(repo, reader, ref, chain, known_count + 1, known_last))


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
    "Walk",
    "check_commit",
    "collect",
    "collect_from",
    "corrupt",
    "load_stream",
    "load_stream_since",
    "load_streams",
    "lookup_commit",
    "verify_walk",
    "walk_streams",
]
