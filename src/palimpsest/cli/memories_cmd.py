"""``pal memories``: the tree of memories on a running server, and who may use each.

A client of ``pal serve`` over :class:`palimpsest.client.Client` (connection, output and
errors: :mod:`.connect`). Every command prints the server's JSON with ``--json``.
"""

from __future__ import annotations

from typing import Any

import click

from palimpsest.cli import connect
from palimpsest.client import UNSET
from palimpsest.errors import InvalidInput

PRIVILEGES = click.Choice(["read", "write", "create", "delete"])


def _line(m: Any) -> str:
    records = m.get("records", {}).get("count", 0)
    children = m.get("children", {}).get("count", 0)
    return (f"{m['id']}  {m['name']}  [{' '.join(m.get('privileges', []))}]  "
            f"{records} record{'' if records == 1 else 's'}, "
            f"{children} child{'' if children == 1 else 'ren'}")


@click.group("memories", cls=connect.ClientGroup)
@connect.connection
def command() -> None:
    """Memories of a running server: list, create, move, grant."""


@command.command("list")
@click.option("--parent", default=None, help="The direct children of this memory.")
@click.option("--ancestor", default=None, help="Every readable memory below this one.")
@click.option("--granted", is_flag=True, help="The memories you were granted.")
@click.option("--limit", type=click.IntRange(1, 200), default=None)
@click.option("--cursor", default=None, help="Continue a listing (its `next`).")
@click.pass_context
def list_cmd(ctx: click.Context, *, parent: str | None, ancestor: str | None, granted: bool,
             limit: int | None, cursor: str | None) -> None:
    """One level of the tree (by default the memories you may enter from the top)."""
    page = connect.client(ctx).memories.list(parent=parent, ancestor=ancestor,
                                             granted=granted or None, limit=limit, cursor=cursor)

    def human() -> list[str]:
        lines = [_line(m) for m in page["data"]] or ["(no memories within your reach)"]
        if page.get("next"):
            lines.append(f"more: --cursor {page['next']}")
        return lines

    connect.emit(ctx, page, human)


@command.command("create")
@click.argument("name")
@click.option("--description", default=None, help="What the memory holds (agents read it).")
@click.option("--parent", "parent_id", default=None, help="Create it below this memory.")
@click.option("--restricted", is_flag=True, default=None,
              help="Grants from above stop here.")
@click.option("--idempotency-key", default=None, help="Repeat safely with the same key.")
@click.pass_context
def create(ctx: click.Context, *, name: str, description: str | None, parent_id: str | None,
           restricted: bool | None, idempotency_key: str | None) -> None:
    """Create a memory: a root, or a child (needs create on the parent)."""
    made = connect.client(ctx).memories.create(name, description=description,
                                               parent_id=parent_id, restricted=restricted,
                                               idempotency_key=idempotency_key)
    connect.emit(ctx, made, lambda: [f"created memory {made['id']} ({made['name']})"])


@command.command("show")
@click.argument("memory_id")
@click.pass_context
def show(ctx: click.Context, *, memory_id: str) -> None:
    """One memory, with your privileges and its counts."""
    m = connect.client(ctx).memories.get(memory_id)
    connect.emit(ctx, m, lambda: [
        _line(m), f"description: {m.get('description', '')}",
        f"parent: {m.get('parent_id') or '(a root)'}",
        f"restricted: {str(m.get('restricted', False)).lower()}"])


@command.command("update")
@click.argument("memory_id")
@click.option("--name", default=None)
@click.option("--description", default=None)
@click.option("--parent", "parent_id", default=None, help="Move it below this memory.")
@click.option("--root", is_flag=True, help="Move it to the top of the tree.")
@click.option("--restricted/--unrestricted", default=None,
              help="Whether grants from above stop here (needs delete).")
@click.option("--idempotency-key", default=None)
@click.pass_context
def update(ctx: click.Context, *, memory_id: str, name: str | None, description: str | None,
           parent_id: str | None, root: bool, restricted: bool | None,
           idempotency_key: str | None) -> None:
    """Rename, describe, restrict or move a memory."""
    if root and parent_id:
        raise InvalidInput("--root and --parent contradict each other", code="invalid-request")
    made = connect.client(ctx).memories.update(
        memory_id, name=name, description=description,
        parent_id=None if root else (parent_id or UNSET), restricted=restricted,
        idempotency_key=idempotency_key)
    connect.emit(ctx, made, lambda: [f"updated {_line(made)}"])


@command.command("delete")
@click.argument("memory_id")
@click.option("--yes", is_flag=True, help="Confirm: the memory, its records and every "
              "memory below it are deleted.")
@click.option("--idempotency-key", default=None)
@click.pass_context
def delete(ctx: click.Context, *, memory_id: str, yes: bool, idempotency_key: str | None) -> None:
    """Delete a memory with its records and every memory below it (needs delete)."""
    if not yes:
        raise InvalidInput("deleting removes the memory, its records and every memory below it",
                           code="confirm", hint=f"run `pal memories delete {memory_id} --yes`")
    done = connect.client(ctx).memories.delete(memory_id, idempotency_key=idempotency_key)
    connect.emit(ctx, done, lambda: [f"deleted {', '.join(done['memories'])}"])


@command.command("grants")
@click.argument("memory_id")
@click.pass_context
def grants(ctx: click.Context, *, memory_id: str) -> None:
    """The grants that reach a memory (its own and inherited ones)."""
    listed = connect.client(ctx).grants.list(memory_id)
    connect.emit(ctx, listed, lambda: [
        f"{g['id']}  {g['principal']}  {' '.join(g['privileges'])}  on {g['memory_id']}"
        f"{' (inherited)' if g.get('inherited') else ''}" for g in listed["data"]]
        or ["(no grants)"])


@command.command("grant")
@click.argument("memory_id")
@click.argument("principal")
@click.argument("privileges", nargs=-1, required=True, type=PRIVILEGES)
@click.option("--idempotency-key", default=None)
@click.pass_context
def grant(ctx: click.Context, *, memory_id: str, principal: str, privileges: tuple[str, ...],
          idempotency_key: str | None) -> None:
    """Grant PRINCIPAL (member:ID or group:ID) PRIVILEGES on MEMORY_ID (needs delete)."""
    made = connect.client(ctx).grants.put(memory_id, principal, privileges,
                                          idempotency_key=idempotency_key)
    connect.emit(ctx, made, lambda: [
        f"granted {made['principal']} {' '.join(made['privileges'])} on {memory_id} "
        f"({made['id']})"])


@command.command("ungrant")
@click.argument("memory_id")
@click.argument("grant_id")
@click.option("--idempotency-key", default=None)
@click.pass_context
def ungrant(ctx: click.Context, *, memory_id: str, grant_id: str,
            idempotency_key: str | None) -> None:
    """Remove one grant (its id from `pal memories grants`)."""
    done = connect.client(ctx).grants.delete(memory_id, grant_id,
                                             idempotency_key=idempotency_key)
    connect.emit(ctx, done, lambda: [f"removed grant {grant_id}"])


@command.command("prime")
@click.argument("memory_id")
@click.option("--budget", type=click.IntRange(1), default=4000, show_default=True,
              help="Tokens at most.")
@click.pass_context
def prime(ctx: click.Context, *, memory_id: str, budget: int) -> None:
    """The memory's standing records, as a harness primes an agent with them."""
    doc = connect.client(ctx).prime(memory_id, budget)
    connect.emit(ctx, doc, lambda: [doc["text"] or "(no standing records)",
                                    f"({doc['tokens']} tokens)"])


@command.command("providers")
@click.pass_context
def providers(ctx: click.Context) -> None:
    """What the server's memory provider really does (its capability document)."""
    doc = connect.client(ctx).providers()
    connect.emit(ctx, doc, lambda: [f"{p['id']}: isolation {p.get('isolation')}, "
                                    f"derivation {p.get('derivation')}" for p in doc["data"]])


__all__ = ["command"]
