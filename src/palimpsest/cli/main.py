"""Entry point of ``pal`` (the console script and ``python -m palimpsest.cli.main``).

A warm ``pal memory recall`` in one of its plain forms is answered without importing click
(:mod:`palimpsest.cli.fast`); everything else runs the click group of
:mod:`palimpsest.cli.app`, whose names (``cli``, ``COMMANDS``, ``fail``) are re-exported here.
Either way every :class:`~palimpsest.errors.PalError` becomes ``pal: <message>`` on stderr and
exit code 1.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    from typing import Any


def main(argv: list[str] | None = None) -> Any:
    """Run ``pal``; every failure, usage errors included, exits 1 with one line on stderr."""
    from palimpsest.cli import fast  # noqa: PLC0415
    from palimpsest.errors import PalError  # noqa: PLC0415

    try:
        if fast.run(sys.argv[1:] if argv is None else list(argv)):
            return None
    except PalError as exc:
        from palimpsest.text import safe_line  # noqa: PLC0415

        sys.stderr.write(f"pal: {safe_line(exc.diagnostics())}\n")
        sys.stderr.flush()
        sys.exit(1)
    from palimpsest.cli.app import run  # noqa: PLC0415

    return run(argv)


def __getattr__(name: str) -> Any:
    """``cli``, ``COMMANDS``, ``LazyGroup`` and ``fail`` from :mod:`palimpsest.cli.app`."""
    if name in ("cli", "COMMANDS", "LazyGroup", "fail"):
        from palimpsest.cli import app  # noqa: PLC0415

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["main"]

if __name__ == "__main__":
    main()
