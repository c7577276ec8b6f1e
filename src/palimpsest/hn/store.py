"""Git I/O for ``hn-memory/0`` through pygit2: ref grammar, verified stream reader, collection,
append with compare-and-swap, and the read-only repository probes projection needs.

This is the only module of ``palimpsest.hn`` that touches Git (replication aside, and the
read-only probes it re-exports from :mod:`palimpsest.hn.store_probe`).  It takes a
``pygit2.Repository`` (bare or not, a quarantine included) or a path, and never assumes a work
tree.  Reading never changes a ref; every failure is raised before anything is returned, so one
bad stream fails the whole collection (hn-memory-v0.md §11, fail closed).

Rules and section numbers refer to shared/reference/hn-memory-v0.md.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from palimpsest.errors import Conflict, InvalidInput, NotFound, Unavailable
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
from palimpsest.hn.sigpool import DeferredSignatures, worker_count
from palimpsest.hn.store_probe import POLICY_PATH, RepoProbe, policy_blob, resolve_commit

LOCAL_PREFIX = "refs/hn/memory/"
REMOTES_PREFIX = "refs/hn/remotes/"
CAS_FAILED = "compare-and-swap failed; reload and retry with a newly signed envelope"

_HEX64 = re.compile(r"[0-9a-f]{64}")
_REMOTE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_BLOB_MODE = 0o100644
_OBJ_COMMIT = pygit2.enums.ObjectType.COMMIT
_OBJ_BLOB = pygit2.enums.ObjectType.BLOB
_OBJ_TREE = pygit2.enums.ObjectType.TREE


@dataclass(frozen=True, slots=True)
class MemoryRef:
    """One memory stream ref: local (``remote`` is None) or accepted from a remote."""

    name: str
    actor: str
    stream: str  # full "sha256:<hex>" form
    head: str
    remote: str | None = None


def _malformed(name: str) -> InvalidInput:
    return InvalidInput(f"malformed memory ref {name!r}", code="malformed-memory-ref")


def valid_remote_name(remote: str) -> bool:
    """Remote names (§8): ``[A-Za-z0-9_][A-Za-z0-9_.-]*``, ≤ 128 bytes, no ``..``, no trailing
    ``.``, no ``.lock`` suffix."""
    return (
        len(remote) <= 128
        and _REMOTE.fullmatch(remote) is not None
        and ".." not in remote
        and not remote.endswith(".")
        and not remote.endswith(".lock")
    )


def local_ref_name(actor: str, stream: str) -> str:
    """``refs/hn/memory/<actor>/<stream hex>`` for a full ``sha256:`` stream ID."""
    return f"{LOCAL_PREFIX}{actor}/{stream.removeprefix('sha256:')}"


def remote_ref_name(remote: str, actor: str, stream: str) -> str:
    """``refs/hn/remotes/<remote>/memory/<actor>/<stream hex>``."""
    return f"{REMOTES_PREFIX}{remote}/memory/{actor}/{stream.removeprefix('sha256:')}"


def parse_memory_ref(name: str, head: str = "") -> MemoryRef | None:
    """Parse a ref name by the §8 grammar.

    Returns ``None`` for refs outside the memory namespaces (e.g. ``refs/hn/remotes/r/actors/…``).

    Raises:
        InvalidInput: ``malformed-memory-ref`` for a ref inside a memory namespace that breaks
            the grammar (wrong component count, upper-case hex, hostile remote name).
    """
    if name.startswith(LOCAL_PREFIX):
        parts = name[len(LOCAL_PREFIX) :].split("/")
        if len(parts) != 2 or not all(_HEX64.fullmatch(p) for p in parts):
            raise _malformed(name)
        return MemoryRef(name, parts[0], "sha256:" + parts[1], head)
    if name.startswith(REMOTES_PREFIX):
        parts = name[len(REMOTES_PREFIX) :].split("/")
        if len(parts) < 2 or parts[1] != "memory":
            return None
        if len(parts) != 4 or not valid_remote_name(parts[0]):
            raise _malformed(name)
        if not (_HEX64.fullmatch(parts[2]) and _HEX64.fullmatch(parts[3])):
            raise _malformed(name)
        return MemoryRef(name, parts[2], "sha256:" + parts[3], head, parts[0])
    return None


def open_repository(where: str | Path | pygit2.Repository) -> pygit2.Repository:
    """Open (discovering upwards from a path) a Git repository.

    Raises:
        NotFound: ``not-a-repository``.
    """
    if isinstance(where, pygit2.Repository):
        return where
    found = pygit2.discover_repository(str(where))
    if found is None:
        raise NotFound(
            f"{where} is not inside a Git repository",
            code="not-a-repository",
            hint="run the command inside a Git repository (git init)",
        )
    try:
        return pygit2.Repository(found)
    except pygit2.GitError as exc:
        raise Unavailable(f"cannot open repository: {exc}", code="git-error") from exc


def git_dir(repo: pygit2.Repository) -> Path:
    """The repository's private directory (``.git`` or the bare repository itself)."""
    return Path(repo.path).resolve()


def list_memory_refs(repo: pygit2.Repository) -> list[MemoryRef]:
    """Every local and accepted memory ref, sorted by name (§8, §11).

    Raises:
        InvalidInput: a malformed or symbolic ref inside the memory namespaces.
    """
    out: list[MemoryRef] = []
    for name in repo.references:
        if not name.startswith(("refs/hn/memory/", "refs/hn/remotes/")):
            continue
        parsed = parse_memory_ref(name)
        if parsed is None:
            continue
        ref = repo.references[name]
        if ref.type != pygit2.enums.ReferenceType.DIRECT:
            raise _malformed(name)
        out.append(
            MemoryRef(parsed.name, parsed.actor, parsed.stream, str(ref.target), parsed.remote)
        )
    out.sort(key=lambda r: r.name)
    return out


def _corrupt(ref: str, commit: str, why: str) -> InvalidInput:
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
        raise _corrupt(ref, commit, "blob object is missing") from exc
    if kind != _OBJ_BLOB:
        raise _corrupt(ref, commit, "tree entry is not a blob")
    if len(data) > limit:
        raise _corrupt(ref, commit, f"blob exceeds {limit} bytes")
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
        raise _corrupt(ref, hexid, "tree object is missing") from exc
    if kind != _OBJ_TREE:
        raise _corrupt(ref, hexid, "tree must hold exactly memory.json and signature")
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
        raise _corrupt(ref, hexid, exc.message) from exc
    except UnicodeDecodeError as exc:
        raise _corrupt(ref, hexid, "invalid signature encoding") from exc
    try:
        raw_key, raw_sig = signature_material(envelope, signature)
    except InvalidInput as exc:
        raise _corrupt(ref, hexid, exc.message) from exc
    return payload, signature, envelope, raw_key, raw_sig


def _memory_at(
    repo: pygit2.Repository, commit: pygit2.Commit, ref: str, hexid: str
) -> tuple[bytes, str, Envelope]:
    """Check one memory commit's tree, payload and signature (§11, per commit)."""
    payload, signature, envelope, raw_key, raw_sig = _checked_at(repo, commit, ref, hexid)
    if not signature_valid(raw_key, raw_sig, payload):
        raise _corrupt(ref, hexid, SIGNATURE_FAILED)
    return payload, signature, envelope


_ENTRY_PAYLOAD = b"100644 memory.json\x00"
_ENTRY_SIGNATURE = b"100644 signature\x00"


def _diagnose_tree(commit: pygit2.Commit, ref: str, hexid: str) -> tuple[Any, Any]:
    """Explain why a tree is not the exact two-entry memory tree (always raises)."""
    try:
        tree = commit.tree
    except pygit2.GitError as exc:  # libgit2 cannot parse the tree object's entries
        raise _corrupt(ref, hexid, "tree object is malformed") from exc
    if len(tree) != 2:
        raise _corrupt(ref, hexid, "tree must hold exactly memory.json and signature")
    payload_id = signature_id = None
    for entry in tree:
        if entry.filemode != _BLOB_MODE:
            raise _corrupt(ref, hexid, "tree entries must be mode 100644 blobs")
        if entry.name == "memory.json" and payload_id is None:
            payload_id = entry.id
        elif entry.name == "signature" and signature_id is None:
            signature_id = entry.id
        else:
            raise _corrupt(ref, hexid, "tree must hold exactly memory.json and signature")
    # Parsed entries looked right but the raw bytes did not (e.g. a zero-padded mode).
    raise _corrupt(ref, hexid, "tree must hold exactly memory.json and signature")


def _lookup_commit(repo: pygit2.Repository, oid: Any, ref: str) -> pygit2.Commit:
    try:
        obj = repo[oid]
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise _corrupt(ref, str(oid), "commit object is missing") from exc
    if obj.type != _OBJ_COMMIT:
        raise _corrupt(ref, str(oid), "object is not a commit")
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
                raise _corrupt(name, hexid, SIGNATURE_FAILED)
        else:
            checks.add(raw_key, raw_sig, payload, (name, hexid))
            failed = checks.failure()
            if failed is not None:
                raise _corrupt(failed[0], failed[1], SIGNATURE_FAILED)
        if envelope.actor != ref.actor or envelope.stream != ref.stream:
            raise _corrupt(name, hexid, "actor or stream does not match the ref owner")
        if envelope.sequence != position:
            raise _corrupt(name, hexid, f"sequence {envelope.sequence} at position {position}")
        if envelope.previous != previous:
            raise _corrupt(name, hexid, "previous does not name the preceding memory")
        previous = memory_id(payload)
        out.append(VerifiedMemory(previous, hexid, payload, envelope, signature, name))
    return tuple(out)


def _walk(repo: pygit2.Repository, ref: MemoryRef, max_entries: int | None) -> list[pygit2.Commit]:
    """The commits of one stream from its root to its head (single parents only)."""
    chain: list[pygit2.Commit] = []
    oid: Any = pygit2.Oid(hex=ref.head)
    while True:
        commit = _lookup_commit(repo, oid, ref.name)
        chain.append(commit)
        if max_entries is not None and len(chain) > max_entries:
            raise _corrupt(ref.name, str(oid), f"stream exceeds {max_entries} entries")
        parents = commit.parent_ids
        if not parents:
            break
        if len(parents) > 1:
            raise _corrupt(ref.name, str(oid), "merge commit: exactly one parent is allowed")
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
    (:mod:`palimpsest.hn.sigpool`; ``workers`` None = automatic, 0 = none) while this process
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
                    raise _corrupt(failed[0], failed[1], SIGNATURE_FAILED) from exc
                raise
            failed = checks.finish()
            if failed is not None:
                raise _corrupt(failed[0], failed[1], SIGNATURE_FAILED)
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
        commit = _lookup_commit(repo, oid, ref.name)
        chain.append(commit)
        parents = commit.parent_ids
        if not parents:
            return None
        if len(parents) > 1:
            raise _corrupt(ref.name, str(oid), "merge commit: exactly one parent is allowed")
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


# ------------------------------------------------------------------------- append


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
        raise _malformed(name)
    head = str(ref.target)
    commit = _lookup_commit(repo, ref.target, name)
    payload, _sig, envelope = _memory_at(repo, commit, name, head)
    if envelope.actor != actor or envelope.stream != stream:
        raise _corrupt(name, head, "actor or stream does not match the ref owner")
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
    "POLICY_PATH",
    "MemoryRef",
    "RepoProbe",
    "StreamHead",
    "append_memory",
    "collect",
    "collect_from",
    "commit_time",
    "compare_and_swap",
    "git_dir",
    "ident_name",
    "list_memory_refs",
    "load_stream",
    "load_stream_since",
    "load_streams",
    "local_ref_name",
    "open_repository",
    "parse_memory_ref",
    "policy_blob",
    "remote_ref_name",
    "resolve_commit",
    "stream_head",
    "valid_remote_name",
    "write_memory_objects",
]
