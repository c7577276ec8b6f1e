"""Git I/O for ``hn-memory/0`` through pygit2: the only part of ``palimpsest.hn`` (with
``replication``) that touches Git.

Modules: :mod:`~palimpsest.hn.store.reader` (ref grammar, the verified per-stream reader,
collection, compare-and-swap append), :mod:`~palimpsest.hn.store.probe` (read-only repository
questions projection asks, the policy blob, revisions), :mod:`~palimpsest.hn.store.sigpool` and
:mod:`~palimpsest.hn.store.sigworker` (the reader's Ed25519 arithmetic in worker processes).
Reading never changes a ref.  This package re-exports the reader's public names, so callers
write ``store.collect(repo)``.
"""

from __future__ import annotations

from palimpsest.hn.store.reader import (
    CAS_FAILED,
    POLICY_PATH,
    MemoryRef,
    RepoProbe,
    StreamHead,
    append_memory,
    collect,
    collect_from,
    commit_time,
    compare_and_swap,
    git_dir,
    ident_name,
    list_memory_refs,
    load_stream,
    load_stream_since,
    load_streams,
    local_ref_name,
    open_repository,
    parse_memory_ref,
    policy_blob,
    remote_ref_name,
    resolve_commit,
    stream_head,
    valid_remote_name,
    write_memory_objects,
)

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
