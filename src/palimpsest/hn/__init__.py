"""Repository memory, wire-compatible with Hubnot's ``hn-memory/0``.

The protocol is specified in shared/reference/hn-memory-v0.md.

Pure modules: ``envelope`` (the signed model, validation, canonical bytes, IDs), ``policy``
(``.hn/policy.json`` and trust), ``projection`` (lifecycle, applicability, evidence, trust) and
``show`` (show and command-result output).  ``store`` is the Git shell (pygit2: verified reader,
compare-and-swap append; its read-only repository probes are in ``store_probe``); ``author``
turns explicit requests into signed appends through it.  Only ``store``, ``store_probe`` and
``replication`` touch Git.
"""
