"""``pal replication select|show``: save and inspect which remote memory a sync may transport.

A selection authorises transport, never trust: selected streams are still quarantined, measured
and verified by ``pal sync`` before anything is accepted (hn-memory-v0.md §20.1).
"""

from __future__ import annotations

import click

from palimpsest import canonical
from palimpsest.hn import replication
from palimpsest.hn.replication.selection import (
    DEFAULT_MAX_ATTACHMENT_BYTES,
    DEFAULT_MAX_EVENTS,
    DEFAULT_MAX_OBJECT_BYTES,
    DEFAULT_MAX_OBJECTS,
    DEFAULT_MAX_TOTAL_BYTES,
    DEFAULT_REMOTE,
    Budgets,
    build_selection,
)
from palimpsest.text import safe_line

_POSITIVE = click.IntRange(min=1)


@click.group(name="replication")
def command() -> None:
    """Choose which remote memory streams pal sync may fetch (transport, not trust)."""


@command.command(name="select")
@click.argument("remote", required=False, default=DEFAULT_REMOTE)
@click.option("--memory", "memories", multiple=True, metavar="STREAM",
              help="Full stream ID sha256:<64 hex> (repeatable).")
@click.option("--actor", "actors", multiple=True, metavar="ACTOR",
              help="Actor ID (repeatable); selects collaboration refs, never memory.")
@click.option("--all", "all_streams", is_flag=True, help="Every uniquely owned stream.")
@click.option("--max-events", type=_POSITIVE, default=DEFAULT_MAX_EVENTS, show_default=True)
@click.option("--max-objects", type=_POSITIVE, default=DEFAULT_MAX_OBJECTS, show_default=True)
@click.option("--max-object-bytes", type=_POSITIVE, default=DEFAULT_MAX_OBJECT_BYTES,
              show_default=True)
@click.option("--max-attachment-bytes", type=_POSITIVE, default=DEFAULT_MAX_ATTACHMENT_BYTES,
              show_default=True)
@click.option("--max-total-bytes", type=_POSITIVE, default=DEFAULT_MAX_TOTAL_BYTES,
              show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the saved selection as JSON.")
def select(  # noqa: PLR0917 - click passes every option positionally by name
    remote: str,
    memories: tuple[str, ...],
    actors: tuple[str, ...],
    all_streams: bool,
    max_events: int,
    max_objects: int,
    max_object_bytes: int,
    max_attachment_bytes: int,
    max_total_bytes: int,
    as_json: bool,
) -> None:
    """Save the replication selection for REMOTE (default origin), replacing any earlier one."""
    selection = build_selection(
        remote,
        memories=list(memories),
        actors=list(actors),
        all_streams=all_streams,
        budgets=Budgets(max_events, max_objects, max_object_bytes, max_attachment_bytes,
                        max_total_bytes),
    )  # fmt: skip
    path = replication.save(".", selection)
    if as_json:
        doc = {"version": 0, "path": str(path), "selection": selection.to_json()}
        click.echo(canonical.encode(doc).decode("utf-8"))
        return
    click.echo(f"Replication selection saved for {safe_line(remote)}: {safe_line(str(path))}")
    click.echo(selection.encode().decode("utf-8"), nl=False)


@command.command(name="show")
@click.argument("remote", required=False, default=DEFAULT_REMOTE)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(remote: str, as_json: bool) -> None:
    """Print the saved selection for REMOTE (or the implicit default) and its accepted refs."""
    view = replication.show_selection(".", remote)
    if as_json:
        click.echo(canonical.encode({"version": 0, **view.to_json()}).decode("utf-8"))
        return
    state = "saved" if view.saved else "not saved (implicit --all with default budgets)"
    click.echo(f"Replication selection for {safe_line(remote)}: {state}")
    click.echo(view.selection.encode().decode("utf-8"), nl=False)
    for ref, head in sorted(view.accepted.items()):
        click.echo(f"Accepted {safe_line(ref)} {safe_line(head)}")
