"""Repository memory, wire-compatible with Hubnot's ``hn-memory/0``.

The protocol is specified in shared/reference/hn-memory-v0.md.

Pure modules: ``ids`` (the vocabulary: names, kinds, typed IDs, memory IDs), ``envelope`` (the
signed model, validation, canonical bytes), ``policy`` (``.hn/policy.json`` and trust),
``projection`` (lifecycle, applicability, evidence, trust) and ``show`` (show and command-result
output).  Packages: ``store/`` (the Git shell through pygit2: refs, the verified reader, the
compare-and-swap append, read-only probes, the Ed25519 worker pool), ``index/`` (the private,
context-free recall index), ``recall/`` (recall and grep over it, warm without libgit2) and
``replication/`` (sync through Git subprocesses).  ``author`` turns explicit requests into
signed appends and ``reading`` holds the read shells the CLI and the MCP tools share.  Git is
read and written only by ``store`` and ``replication``; the others take an open repository and
read through ``store`` (the warm recall reads ref files and loose objects through
``store.headfiles`` and ``store.objects``, without libgit2).
"""
