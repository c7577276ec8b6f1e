"""``recall`` and ``grep`` over the verified index (hn-memory-v0.md §16, §23).

Modules: :mod:`~palimpsest.hn.recall.request` (requests, normalisation, query digests, cursors;
pure) and :mod:`~palimpsest.hn.recall.pages` (bounded pages and the JSON envelope).  This package
re-exports :func:`recall`, :func:`grep` and :class:`RecallResult`.
"""

from __future__ import annotations

from palimpsest.hn.recall.pages import (
    LeftOut,
    RecallResult,
    grep,
    recall,
)

__all__ = [
    "LeftOut",
    "RecallResult",
    "grep",
    "recall",
]
