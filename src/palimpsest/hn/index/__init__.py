"""The private, disposable recall index below ``<git-dir>/hn/memory/``: verified once per
stream head and free of query context (see :mod:`palimpsest.hn.index.core`).

Modules: :mod:`~palimpsest.hn.index.core` (open, cache, refresh, the lookups of a query
context), :mod:`~palimpsest.hn.index.build` (the streaming full build),
:mod:`~palimpsest.hn.index.schema` (schema, row format and MACs, postings, fingerprint),
:mod:`~palimpsest.hn.index.files` (directory and file safety), :mod:`~palimpsest.hn.index.write`
(writes and re-projection), :mod:`~palimpsest.hn.index.reach` (the anchors a query commit
reaches), :mod:`~palimpsest.hn.index.verify` (re-derive and compare) and
:mod:`~palimpsest.hn.index.query` (the SQL of recall and grep).  This package re-exports the
names its callers use.
"""

from __future__ import annotations

from palimpsest.hn.index.build import Progress
from palimpsest.hn.index.core import MemoryIndex, guarded, open_index
from palimpsest.hn.index.files import index_dir
from palimpsest.hn.index.schema import (
    FORMAT,
    INDEX_NAME,
    KEY_NAME,
    ROW_COLUMNS,
    IndexState,
    IndexTampered,
    StaleIndex,
    index_tokens,
    recall_record,
    row_values,
    search_fields,
    source_fingerprint,
)
from palimpsest.hn.index.verify import verify_index

__all__ = [
    "FORMAT",
    "INDEX_NAME",
    "KEY_NAME",
    "ROW_COLUMNS",
    "IndexState",
    "IndexTampered",
    "MemoryIndex",
    "Progress",
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
