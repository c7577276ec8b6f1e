"""Progress on long work (an index build or verify, a sync, a promotion), for a person only.

:func:`progress` yields a ``(phase, done, total)`` callback — or None when the output is not for
a person: with ``--json``, or when stderr is not a terminal.  The display is rich's, on stderr
(never on stdout), transient, and created at the first report, so a command whose work is quick
never imports rich (start-up time).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Report = Callable[[str, int, int], None]


class _Bar:
    """A rich progress display made on first use, one task per phase."""

    def __init__(self) -> None:
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def update(self, phase: str, done: int, total: int) -> None:
        if self._progress is None:
            from rich.console import Console  # noqa: PLC0415 - only when there is work to show
            from rich.progress import (  # noqa: PLC0415
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeRemainingColumn(), console=Console(stderr=True), transient=True,
            )  # fmt: skip
            self._progress.start()
        task = self._tasks.get(phase)
        if task is None:
            task = self._tasks[phase] = self._progress.add_task(phase, total=total)
        self._progress.update(task, completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


@contextmanager
def progress(as_json: bool) -> Iterator[Report | None]:
    """A progress callback for an interactive stderr; None with ``--json`` or no terminal."""
    if as_json or not sys.stderr.isatty():
        yield None
        return
    bar = _Bar()
    try:
        yield bar.update
    finally:
        bar.close()


__all__ = ["Report", "progress"]
