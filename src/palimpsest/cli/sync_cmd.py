"""``pal sync [REMOTE] [--recover-shallow]``: fetch, verify and promote selected memory, then
publish local memory refs (hn-memory-v0.md §20).

Output: one line per stream (``Replication memory <stream>: promoted`` or
``Replication memory <stream>: failed (<status>): <diagnostic>``) and one per published ref.
A sync in which any stream failed or a push was rejected exits 1 after printing its report.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from palimpsest import canonical
from palimpsest.errors import PalError
from palimpsest.hn import replication
from palimpsest.hn.replication.selection import DEFAULT_REMOTE
from palimpsest.text import safe_line


@contextmanager
def _progress(enabled: bool) -> Iterator[replication.Progress | None]:
    """A rich progress display on stderr, only for an interactive terminal."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    # rich loads only for an interactive sync (start-up time of every other command).
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn  # noqa: PLC0415

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=Console(stderr=True), transient=True) as bar:  # fmt: skip
        tasks: dict[str, object] = {}

        def update(phase: str, done: int, total: int) -> None:
            task = tasks.get(phase)
            if task is None:
                task = tasks[phase] = bar.add_task(phase, total=total)
            bar.update(task, completed=done, total=total)  # type: ignore[arg-type]

        yield update


@click.command(name="sync")
@click.argument("remote", required=False, default=DEFAULT_REMOTE)
@click.option("--recover-shallow", is_flag=True,
              help="Fetch exactly the missing history the saved selection needs (shallow clone).")
@click.option("--json", "as_json", is_flag=True, help="Print the sync report as JSON.")
def command(remote: str, recover_shallow: bool, as_json: bool) -> None:
    """Fetch the selected memory streams of REMOTE into quarantine, verify them, promote the
    valid ones, and publish local memory refs (never the primary branch)."""
    with _progress(not as_json) as progress:
        report = replication.sync(".", remote, recover_shallow=recover_shallow,
                                  progress=progress)  # fmt: skip
    if as_json:
        click.echo(canonical.encode(report.to_json()).decode("utf-8"))
    else:
        for note in report.recovered:
            click.echo(f"Recovered: {safe_line(note)}")
        for item in report.memories:
            if item.status == "promoted":
                suffix = " (unchanged)" if item.unchanged else ""
                click.echo(f"Replication memory {item.stream}: promoted{suffix}")
            else:
                click.echo(f"Replication memory {item.stream}: failed ({item.status}): "
                           f"{safe_line(item.diagnostic)}")  # fmt: skip
        for selector in report.selectors:
            click.echo(f"Replication {selector.kind} {selector.id}: {selector.status}: "
                       f"{selector.diagnostic}")  # fmt: skip
        for ref in report.malformed_refs:
            click.echo(f"Replication ignored malformed remote ref {safe_line(ref)}")
        for oid in report.shallow_recovered:
            click.echo(f"Recovered shallow history: {oid}")
        for pushed in report.published:
            why = f": {safe_line(pushed.diagnostic)}" if pushed.diagnostic else ""
            click.echo(f"Published {pushed.ref}: {pushed.status}{why}")
    if report.failed:
        failed = sum(1 for item in report.memories if item.status in replication.FAILED)
        rejected = len(report.published) - sum(
            1 for item in report.published if item.status in ("published", "up-to-date")
        )
        raise PalError(
            f"sync finished with {failed} failed stream(s) and {rejected} unpublished ref(s)",
            code="sync-incomplete",
        )
