"""Git I/O for ``hn-memory/0`` through pygit2: the only part of ``palimpsest.hn`` (with
``replication``) that touches Git.

Modules: :mod:`~palimpsest.hn.store.refs` (the ref grammar, opening a repository, listing
memory refs), :mod:`~palimpsest.hn.store.reader` (the verified per-stream reader and
collection), :mod:`~palimpsest.hn.store.append` (the Git objects of one memory and the
compare-and-swap of its ref), :mod:`~palimpsest.hn.store.probe` (read-only repository
questions projection asks, the policy blob, revisions), :mod:`~palimpsest.hn.store.sigpool` and
:mod:`~palimpsest.hn.store.sigworker` (the reader's Ed25519 arithmetic in worker processes).
Reading never changes a ref.  This package re-exports their public names, so callers
write ``store.collect(repo)``.
"""

from __future__ import annotations

from palimpsest.hn.store.append import (
    CAS_FAILED,
    StreamHead,
    append_memory,
    commit_time,
    compare_and_swap,
    ident_name,
    stream_head,
    write_memory_objects,
)
from palimpsest.hn.store.probe import (
    POLICY_PATH,
    RepoProbe,
    policy_blob,
    resolve_commit,
)
from palimpsest.hn.store.reader import (
    Walk,
    collect,
    collect_from,
    load_stream,
    load_stream_since,
    load_streams,
    verify_walk,
    walk_streams,
)
from palimpsest.hn.store.refs import (
    LOCAL_PREFIX,
    REMOTES_PREFIX,
    MemoryRef,
    git_dir,
    list_memory_refs,
    local_ref_name,
    malformed_ref,
    open_repository,
    parse_memory_ref,
    remote_ref_name,
    valid_remote_name,
)

__all__ = [
    "CAS_FAILED",
    "LOCAL_PREFIX",
    "POLICY_PATH",
    "REMOTES_PREFIX",
    "MemoryRef",
    "RepoProbe",
    "StreamHead",
    "Walk",
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
    "malformed_ref",
    "open_repository",
    "parse_memory_ref",
    "policy_blob",
    "remote_ref_name",
    "resolve_commit",
    "stream_head",
    "valid_remote_name",
    "verify_walk",
    "walk_streams",
    "write_memory_objects",
]
