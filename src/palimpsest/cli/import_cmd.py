"""``pal import --git DIR``: an exported history brought into this server's data directory.

Runs on the data directory, like ``pal export`` (also beside a running ``pal serve``). The
repository goes through replication's quarantine → validate → promote path: fetched into a
throw-away quarantine, measured against the budgets, verified as ``pal verify`` verifies it,
and promoted in one transaction — or not at all. ``--keys`` pins the exporting server's
published keys; without it ``--trust-carried-keys`` must say that the keys the export carries
are to be trusted. ``--as accepted`` (default) lands the history as it was; ``--as reviewed``
lands it on import refs and opens a merge request into ``refs/shared/main`` for the review
desk. A refused import prints its outcome (``over-budget``, ``structurally-invalid``…) and
exits 1.
"""

from __future__ import annotations

from pathlib import Path

import click

from palimpsest import canonical
from palimpsest.cli.datadir import default_data_dir, holds_store
from palimpsest.cli.verify_cmd import read_keys
from palimpsest.errors import InvalidInput, NotFound
from palimpsest.text import safe_text


@click.command("import")
@click.option("--git", "git_dir", required=True,
              type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="The repository `pal export --git` wrote.")
@click.option("--keys", "keys_file", type=click.Path(path_type=Path, dir_okay=False),
              help="The exporting server's published key set (GET /v1/provenance/keys).")
@click.option("--trust-carried-keys", is_flag=True,
              help="Trust the key set the export carries (no --keys).")
@click.option("--as", "mode", type=click.Choice(["accepted", "reviewed"]), default="accepted",
              show_default=True, help="Land the history as it was, or for review.")
@click.option("--member", "member_id", default=None,
              help="The member who owns what the import makes (reviewed: who proposes).")
@click.option("--max-changesets", type=click.IntRange(min=1), default=None,
              help="Budget: at most this many changesets (default 1,000,000).")
@click.option("--max-object-bytes", type=click.IntRange(min=1), default=None,
              help="Budget: no object larger than this (default 8 MiB).")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Data directory (default: $PAL_DATA_DIR or "
                   "~/.local/share/palimpsest/service).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def command(git_dir: Path, keys_file: Path | None, trust_carried_keys: bool,  # noqa: PLR0917
            mode: str, member_id: str | None, max_changesets: int | None,
            max_object_bytes: int | None, data_dir: Path | None, as_json: bool) -> None:
    """Import an exported history: quarantine, verify, then promote, or keep nothing."""
    from dataclasses import replace  # noqa: PLC0415

    from palimpsest.service.memories import MemoryService  # noqa: PLC0415 — keep start-up fast
    from palimpsest.service.provenance.importer import DEFAULT_BUDGETS  # noqa: PLC0415

    directory = (data_dir or default_data_dir()).expanduser()
    if not holds_store(directory):
        raise NotFound(f"{directory} holds no memory store", code="no-store",
                       hint="pass the data directory `pal serve` printed (--data-dir)")
    keys = read_keys(keys_file)
    if keys is None and not trust_carried_keys:
        raise InvalidInput("an import trusts the exporting server's keys, and none were given",
                           code="usage", hint="pass --keys KEYS (its GET /v1/provenance/keys), "
                           "or --trust-carried-keys to trust the ones the export carries")
    budgets = DEFAULT_BUDGETS
    if max_changesets is not None:
        budgets = replace(budgets, max_events=max_changesets)
    if max_object_bytes is not None:
        budgets = replace(budgets, max_object_bytes=max_object_bytes)
    with MemoryService(directory) as svc:
        report = svc.import_git(git_dir, keys=keys, mode=mode, member_id=member_id,
                                budgets=budgets)
    if as_json:
        click.echo(canonical.encode_indent(report).decode(), nl=False)
    elif report["promoted"]:
        for mem in report["memories"]:
            moved = ", ".join(f"{r['ref']} {r['status']}" for r in mem["refs"]) or "no refs"
            click.echo(safe_text(f"memory {mem['memory_id']}: {mem['new_changesets']} new "
                                 f"changesets; {moved}"))
            if mem.get("proposal_id"):
                click.echo(safe_text(f"  proposal {mem['proposal_id']} opened for review"))
            elif mem.get("proposal_note"):
                click.echo(safe_text(f"  {mem['proposal_note']}"))
    if not report["promoted"]:
        raise InvalidInput(f"import refused ({report['status']}): {report['diagnostic']}",
                           code=report["status"], hint="nothing was promoted; the quarantine "
                           "is gone. Check the repository with pal verify DIR")
