"""Git I/O for ``hn-memory/0`` through pygit2: the only part of ``palimpsest.hn`` (with
``replication``) that touches Git.

Modules: :mod:`~palimpsest.hn.store.refs` (the ref grammar),
:mod:`~palimpsest.hn.store.repository` (opening a repository, listing memory refs),
:mod:`~palimpsest.hn.store.headfiles` (the ref files a warm recall reads without libgit2),
:mod:`~palimpsest.hn.store.objects` (raw object reads), :mod:`~palimpsest.hn.store.reader`
(the verified per-stream reader and collection), :mod:`~palimpsest.hn.store.append` (the Git
objects of one memory and the compare-and-swap of its ref), :mod:`~palimpsest.hn.store.probe`
(read-only repository questions projection asks, the policy blob, revisions),
:mod:`~palimpsest.hn.store.sigpool` and :mod:`~palimpsest.hn.store.sigworker` (the reader's
Ed25519 arithmetic in worker processes).
Reading never changes a ref.  This package re-exports their public names, so callers
write ``store.collect(repo)``; each is imported on first use (PEP 562), so importing one light
module of the package (``refs``, ``headfiles``) does not start libgit2.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    from typing import Any

    from palimpsest.hn.store.append import (
        CAS_FAILED as CAS_FAILED,
    )
    from palimpsest.hn.store.append import (
        StreamHead as StreamHead,
    )
    from palimpsest.hn.store.append import (
        append_memory as append_memory,
    )
    from palimpsest.hn.store.append import (
        commit_time as commit_time,
    )
    from palimpsest.hn.store.append import (
        compare_and_swap as compare_and_swap,
    )
    from palimpsest.hn.store.append import (
        ident_name as ident_name,
    )
    from palimpsest.hn.store.append import (
        stream_head as stream_head,
    )
    from palimpsest.hn.store.append import (
        write_memory_objects as write_memory_objects,
    )
    from palimpsest.hn.store.probe import (
        POLICY_PATH as POLICY_PATH,
    )
    from palimpsest.hn.store.probe import (
        RepoProbe as RepoProbe,
    )
    from palimpsest.hn.store.probe import (
        policy_at as policy_at,
    )
    from palimpsest.hn.store.probe import (
        policy_blob as policy_blob,
    )
    from palimpsest.hn.store.probe import (
        resolve_commit as resolve_commit,
    )
    from palimpsest.hn.store.reader import (
        Walk as Walk,
    )
    from palimpsest.hn.store.reader import (
        collect as collect,
    )
    from palimpsest.hn.store.reader import (
        collect_from as collect_from,
    )
    from palimpsest.hn.store.reader import (
        load_stream as load_stream,
    )
    from palimpsest.hn.store.reader import (
        load_stream_since as load_stream_since,
    )
    from palimpsest.hn.store.reader import (
        load_streams as load_streams,
    )
    from palimpsest.hn.store.reader import (
        verify_walk as verify_walk,
    )
    from palimpsest.hn.store.reader import (
        walk_streams as walk_streams,
    )
    from palimpsest.hn.store.refs import (
        LOCAL_PREFIX as LOCAL_PREFIX,
    )
    from palimpsest.hn.store.refs import (
        REMOTES_PREFIX as REMOTES_PREFIX,
    )
    from palimpsest.hn.store.refs import (
        MemoryRef as MemoryRef,
    )
    from palimpsest.hn.store.refs import (
        local_ref_name as local_ref_name,
    )
    from palimpsest.hn.store.refs import (
        malformed_ref as malformed_ref,
    )
    from palimpsest.hn.store.refs import (
        parse_memory_ref as parse_memory_ref,
    )
    from palimpsest.hn.store.refs import (
        remote_ref_name as remote_ref_name,
    )
    from palimpsest.hn.store.refs import (
        valid_remote_name as valid_remote_name,
    )
    from palimpsest.hn.store.repository import (
        git_dir as git_dir,
    )
    from palimpsest.hn.store.repository import (
        list_memory_refs as list_memory_refs,
    )
    from palimpsest.hn.store.repository import (
        open_repository as open_repository,
    )

_EXPORTS = {
    "CAS_FAILED": "append",
    "LOCAL_PREFIX": "refs",
    "MemoryRef": "refs",
    "POLICY_PATH": "probe",
    "REMOTES_PREFIX": "refs",
    "RepoProbe": "probe",
    "StreamHead": "append",
    "Walk": "reader",
    "append_memory": "append",
    "collect": "reader",
    "collect_from": "reader",
    "commit_time": "append",
    "compare_and_swap": "append",
    "git_dir": "repository",
    "ident_name": "append",
    "list_memory_refs": "repository",
    "load_stream": "reader",
    "load_stream_since": "reader",
    "load_streams": "reader",
    "local_ref_name": "refs",
    "malformed_ref": "refs",
    "open_repository": "repository",
    "parse_memory_ref": "refs",
    "policy_at": "probe",
    "policy_blob": "probe",
    "remote_ref_name": "refs",
    "resolve_commit": "probe",
    "stream_head": "append",
    "valid_remote_name": "refs",
    "verify_walk": "reader",
    "walk_streams": "reader",
    "write_memory_objects": "append",
}


def __getattr__(name: str) -> Any:
    """Import the module of an exported name on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


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
    "policy_at",
    "policy_blob",
    "remote_ref_name",
    "resolve_commit",
    "stream_head",
    "valid_remote_name",
    "verify_walk",
    "walk_streams",
    "write_memory_objects",
]
