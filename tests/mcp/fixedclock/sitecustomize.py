"""A fixed signing clock for the ``pal`` processes of the byte-identity tests.

On ``PYTHONPATH`` only for those processes (tests/mcp/test_repo_writes.py): with
``PAL_TEST_SIGNING_TIME`` set, every envelope a ``pal memory`` command or a ``pal mcp`` write tool
signs carries that timestamp, so the same request made through the CLI and through MCP can be
compared byte for byte. Nothing in ``src`` reads this variable.
"""

import os

_FIXED = os.environ.get("PAL_TEST_SIGNING_TIME")
if _FIXED:
    import palimpsest.hn.author as _author

    _author.now_timestamp = lambda ns=None: _FIXED  # type: ignore[assignment,misc]
