"""``pal sync [REMOTE] [--recover-shallow]``: fetch, verify and promote selected memory, then
publish local memory refs (hn-memory-v0.md §20).

Output: one line per stream (``Replication memory <stream>: promoted`` or
``Replication memory <stream>: failed (<status>): <diagnostic>``) and one per published ref.
A sync in which any stream failed or a push was rejected exits 1 after printing its report.
"""

from __future__ import annotations

import click

from palimpsest import canonical
from palimpsest.cli.progress import progress
from palimpsest.errors import PalError
from palimpsest.hn import replication
from palimpsest.hn.replication.selection import DEFAULT_REMOTE
from palimpsest.text import safe_line


@click.command(name="sync")
@click.argument("remote", required=False, default=DEFAULT_REMOTE)
@click.option("--recover-shallow", is_flag=True,
              help="Fetch exactly the missing history the saved selection needs (shallow clone).")
@click.option("--json", "as_json", is_flag=True, help="Print the sync report as JSON.")
def command(remote: str, recover_shallow: bool, as_json: bool) -> None:
    """Fetch the selected memory streams of REMOTE into quarantine, verify them, promote the
    valid ones, and publish local memory refs (never the primary branch)."""
    with progress(as_json) as report:
        result = replication.sync(".", remote, recover_shallow=recover_shallow,
                                  progress=report)  # fmt: skip
    if as_json:
        click.echo(canonical.encode(result.to_json()).decode("utf-8"))
    else:
        for note in result.recovered:
            click.echo(f"Recovered: {safe_line(note)}")
        for item in result.memories:
            if item.status == "promoted":
                suffix = " (unchanged)" if item.unchanged else ""
                click.echo(f"Replication memory {item.stream}: promoted{suffix}")
            else:
                click.echo(f"Replication memory {item.stream}: failed ({item.status}): "
                           f"{safe_line(item.diagnostic)}")  # fmt: skip
        for selector in result.selectors:
            click.echo(f"Replication {selector.kind} {selector.id}: {selector.status}: "
                       f"{selector.diagnostic}")  # fmt: skip
        for ref in result.malformed_refs:
            click.echo(f"Replication ignored malformed remote ref {safe_line(ref)}")
        for oid in result.shallow_recovered:
            click.echo(f"Recovered shallow history: {oid}")
        for pushed in result.published:
            why = f": {safe_line(pushed.diagnostic)}" if pushed.diagnostic else ""
            click.echo(f"Published {pushed.ref}: {pushed.status}{why}")
    if result.failed:
        failed = sum(1 for item in result.memories if item.status in replication.FAILED)
        rejected = len(result.published) - sum(
            1 for item in result.published if item.status in ("published", "up-to-date")
        )
        raise PalError(
            f"sync finished with {failed} failed stream(s) and {rejected} unpublished ref(s)",
            code="sync-incomplete",
        )
