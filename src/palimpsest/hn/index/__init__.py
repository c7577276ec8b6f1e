"""The private, disposable recall index below ``<git-dir>/hn/memory/``.

Modules: :mod:`~palimpsest.hn.index.core` (open, cache, rebuild, refresh, verify),
:mod:`~palimpsest.hn.index.schema` (schema, row format and MACs, postings, fingerprint),
:mod:`~palimpsest.hn.index.files` (directory and file safety), :mod:`~palimpsest.hn.index.write`
(writes and incremental re-projection) and :mod:`~palimpsest.hn.index.query` (the SQL of recall
and grep).  This package re-exports the core's public names.
"""

from __future__ import annotations

from palimpsest.hn.index.core import (
    FORMAT,
    INDEX_NAME,
    KEY_NAME,
    LIFECYCLE_RANK,
    ROW_COLUMNS,
    IndexContext,
    IndexState,
    IndexTampered,
    MemoryIndex,
    StaleIndex,
    guarded,
    index_dir,
    index_tokens,
    open_index,
    recall_record,
    row_values,
    search_fields,
    source_fingerprint,
    verify_index,
)

__all__ = [
    "FORMAT",
    "INDEX_NAME",
    "KEY_NAME",
    "LIFECYCLE_RANK",
    "ROW_COLUMNS",
    "IndexContext",
    "IndexState",
    "IndexTampered",
    "MemoryIndex",
    "StaleIndex",
    "guarded",
    "index_dir",
    "index_tokens",
    "open_index",
    "recall_record",
    "row_values",
    "search_fields",
    "source_fingerprint",
    "verify_index",
]
