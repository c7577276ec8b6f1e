"""``pal export --git DIR``: a memory service's history as a real Git repository.

Runs on the data directory, like ``pal admin`` (also beside a running ``pal serve``): one
commit per changeset holding its canonical JSON and signatures, refs mirroring the memory's
refs, erased bodies left out with their digests kept, and a statement of every ref's head
signed by the server. ``git log refs/shared/main`` then reads the history, and ``pal verify
DIR`` checks it anywhere, without the server.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from palimpsest import canonical
from palimpsest.cli.datadir import default_data_dir, holds_store
from palimpsest.errors import InvalidInput, NotFound
from palimpsest.text import safe_text


@click.command("export")
@click.option("--git", "git_dir", required=True, type=click.Path(path_type=Path),
              help="The new repository's directory (must not exist, or be empty).")
@click.option("--memory", "memory_id", default=None,
              help="Export this memory only (its refs keep their own names).")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Data directory (default: $PAL_DATA_DIR or "
                   "~/.local/share/palimpsest/service).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def command(git_dir: Path, memory_id: str | None, data_dir: Path | None, as_json: bool) -> None:
    """Write the history as a Git repository that `pal verify DIR` checks offline."""
    from palimpsest.service.memories import MemoryService  # noqa: PLC0415 — keep start-up fast

    directory = (data_dir or default_data_dir()).expanduser()
    if not holds_store(directory):
        raise NotFound(f"{directory} holds no memory store", code="no-store",
                       hint="pass the data directory `pal serve` printed (--data-dir)")
    if memory_id is not None and not memory_id.strip():
        raise InvalidInput("--memory must name a memory", code="usage")
    tty = sys.stderr.isatty() and not as_json

    def progress(n: int) -> None:
        if tty and n % 1000 == 0:
            click.echo(f"\r{n} changesets written", err=True, nl=False)

    with MemoryService(directory) as svc:
        report = svc.export_git(git_dir, memory_id, progress)
    if tty:
        click.echo("", err=True)
    if as_json:
        click.echo(canonical.encode_indent(report).decode(), nl=False)
    else:
        click.echo(safe_text(f"exported {report['changesets']} changesets with "
                             f"{report['signatures']} signatures and {report['refs']} refs of "
                             f"{len(report['memories'])} memories to {report['directory']}"))
