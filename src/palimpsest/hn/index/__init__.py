"""The private, disposable recall index below ``<git-dir>/hn/memory/``: verified once per
stream head and free of query context (see :mod:`palimpsest.hn.index.core`).

Modules: :mod:`~palimpsest.hn.index.core` (open files and the lookups of a query context; no
Git), :mod:`~palimpsest.hn.index.update` (refresh and rebuild from the refs),
:mod:`~palimpsest.hn.index.build` (the streaming full build), :mod:`~palimpsest.hn.index.schema`
(schema, row format and MACs, postings, fingerprint), :mod:`~palimpsest.hn.index.files`
(directory and file safety), :mod:`~palimpsest.hn.index.rows` (a projected row as stored),
:mod:`~palimpsest.hn.index.write` (writes and re-projection),
:mod:`~palimpsest.hn.index.reach` (the anchors a query commit reaches),
:mod:`~palimpsest.hn.index.verify` (re-derive and compare) and :mod:`~palimpsest.hn.index.query`
(the SQL of recall and grep).  This package re-exports the names its callers use, each imported
on first use (PEP 562): the light modules never start libgit2.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    from typing import Any

    from palimpsest.hn.index.core import MemoryIndex as MemoryIndex
    from palimpsest.hn.index.core import open_current as open_current
    from palimpsest.hn.index.files import index_dir as index_dir
    from palimpsest.hn.index.rows import recall_record as recall_record
    from palimpsest.hn.index.rows import row_values as row_values
    from palimpsest.hn.index.schema import (
        FORMAT as FORMAT,
    )
    from palimpsest.hn.index.schema import (
        INDEX_NAME as INDEX_NAME,
    )
    from palimpsest.hn.index.schema import (
        KEY_NAME as KEY_NAME,
    )
    from palimpsest.hn.index.schema import (
        ROW_COLUMNS as ROW_COLUMNS,
    )
    from palimpsest.hn.index.schema import (
        IndexState as IndexState,
    )
    from palimpsest.hn.index.schema import (
        IndexTampered as IndexTampered,
    )
    from palimpsest.hn.index.schema import (
        Progress as Progress,
    )
    from palimpsest.hn.index.schema import (
        StaleIndex as StaleIndex,
    )
    from palimpsest.hn.index.schema import (
        index_tokens as index_tokens,
    )
    from palimpsest.hn.index.schema import (
        search_fields as search_fields,
    )
    from palimpsest.hn.index.schema import (
        source_fingerprint as source_fingerprint,
    )
    from palimpsest.hn.index.update import guarded as guarded
    from palimpsest.hn.index.update import open_index as open_index
    from palimpsest.hn.index.verify import verify_index as verify_index

_EXPORTS = {
    "FORMAT": "schema",
    "INDEX_NAME": "schema",
    "KEY_NAME": "schema",
    "ROW_COLUMNS": "schema",
    "IndexState": "schema",
    "IndexTampered": "schema",
    "MemoryIndex": "core",
    "Progress": "schema",
    "StaleIndex": "schema",
    "guarded": "update",
    "index_dir": "files",
    "index_tokens": "schema",
    "open_current": "core",
    "open_index": "update",
    "recall_record": "rows",
    "row_values": "rows",
    "search_fields": "schema",
    "source_fingerprint": "schema",
    "verify_index": "verify",
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
    "open_current",
    "open_index",
    "recall_record",
    "row_values",
    "search_fields",
    "source_fingerprint",
    "verify_index",
]
