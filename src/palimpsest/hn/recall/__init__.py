"""``recall`` and ``grep`` over the verified index (hn-memory-v0.md §16, §23).

Modules: :mod:`~palimpsest.hn.recall.request` (requests, normalisation, query digests, cursors;
pure), :mod:`~palimpsest.hn.recall.context` (the judgments of a query context),
:mod:`~palimpsest.hn.recall.pages` (answers over an open index and the JSON envelope) and
:mod:`~palimpsest.hn.recall.run` (through Git) and :mod:`~palimpsest.hn.recall.warm` (a warm
recall without Git).  This package re-exports
:func:`recall`, :func:`grep`, :func:`recall_kept`, :class:`RecallResult` and :class:`LeftOut`,
each imported on first use (PEP 562).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    from typing import Any

    from palimpsest.hn.recall.pages import LeftOut as LeftOut
    from palimpsest.hn.recall.pages import RecallResult as RecallResult
    from palimpsest.hn.recall.run import grep as grep
    from palimpsest.hn.recall.run import recall as recall
    from palimpsest.hn.recall.warm import recall_kept as recall_kept

_EXPORTS = {
    "LeftOut": "pages",
    "RecallResult": "pages",
    "grep": "run",
    "recall": "run",
    "recall_kept": "warm",
}


def __getattr__(name: str) -> Any:
    """Import the module of an exported name on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["LeftOut", "RecallResult", "grep", "recall", "recall_kept"]
