"""Repository memory, wire-compatible with Hubnot's ``hn-memory/0``.

The protocol is specified in shared/reference/hn-memory-v0.md.

``envelope`` (the signed model), ``policy`` and ``projection`` are pure; ``store`` is the only
module here that touches Git.
"""
