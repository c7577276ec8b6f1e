"""``pal admin``: the operator's side of the memory service, on its data directory.

Members (human or agent), groups and memberships, credentials (minted here and shown once;
only their hash is stored), grants on memories, and ``rebuild``, which re-derives every
projection and the search index from the changesets and fails unless the result equals what
was there. Works while ``pal serve`` runs on the same directory (SQLite WAL).

A directory that holds no store is refused unless ``--create`` says to start one there: a typo
in ``--data-dir`` must not mint credentials into an empty store the server never reads.
``--data-dir``, ``--create`` and ``--json`` go before or after the subcommand
(:mod:`palimpsest.cli.options`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from palimpsest import canonical
from palimpsest.cli import options
from palimpsest.cli.datadir import default_data_dir, holds_store
from palimpsest.errors import InvalidInput, NotFound
from palimpsest.service.memories import MemoryService
from palimpsest.text import safe_text

Wire = dict[str, Any]


def _database(ctx: click.Context) -> str | None:
    url: str | None = options.value(ctx, "database")
    return url or None


def _store_dir(ctx: click.Context) -> Path:
    directory: Path = (options.value(ctx, "data_dir") or default_data_dir()).expanduser()
    if _database(ctx) is None and not holds_store(directory) and not options.value(ctx,
                                                                                    "create"):
        raise NotFound(f"{directory} holds no memory store", code="no-store",
                       hint="pass the data directory `pal serve` printed at start (--data-dir "
                       "or $PAL_DATA_DIR), or add --create to start a new store there")
    return directory


@contextmanager
def _service(ctx: click.Context) -> Iterator[Any]:
    svc = MemoryService(_store_dir(ctx), database=_database(ctx))
    try:
        yield svc
    finally:
        svc.close()


def _emit(ctx: click.Context, value: Wire | list[Wire], human: Callable[[], list[str]]) -> None:
    if options.value(ctx, "as_json"):
        click.echo(canonical.encode_indent(value).decode(), nl=False)
    else:
        for line in human():
            click.echo(safe_text(line))


@click.group("admin")
@options.shared("--data-dir", "data_dir", type=click.Path(path_type=Path, file_okay=False),
                default=None, help="Data directory (default: $PAL_DATA_DIR or "
                "~/.local/share/palimpsest/service).")
@options.shared("--create", "create", is_flag=True,
                help="Create a new, empty store when the directory holds none.")
@options.shared("--database", "database", default=None, envvar="PAL_DATABASE_URL",
                help="postgresql:// URL of the store ($PAL_DATABASE_URL), as pal serve "
                "--database; the data directory keeps keys and file bytes.")
def command() -> None:
    """Manage members, groups, credentials and grants of the memory service."""


# --- members ---------------------------------------------------------------------------------


@command.group("member")
def member() -> None:
    """Members: the people and agents who act."""


@member.command("create")
@click.argument("name")
@click.option("--type", "type_", type=click.Choice(["human", "agent"]), default="human",
              show_default=True)
@click.option("--admin", is_flag=True, help="Make the member an administrator.")
@click.pass_context
def member_create(ctx: click.Context, name: str, type_: str, admin: bool) -> None:
    """Create a member."""
    with _service(ctx) as svc:
        made = svc.create_member(name, type_, admin=admin).to_wire()
    _emit(ctx, made, lambda: [f"created {made['type']} member {made['id']} ({name})"])


@member.command("list")
@click.pass_context
def member_list(ctx: click.Context) -> None:
    """List members."""
    with _service(ctx) as svc:
        rows = [m.to_wire() for m in svc.list_members()]
    _emit(ctx, rows, lambda: [
        f"{m['id']}  {m['type']:<5}  {'admin ' if m['admin'] else ''}{m['name']}" for m in rows])


# --- groups ----------------------------------------------------------------------------------


@command.group("group")
def group() -> None:
    """Groups: sets of members that hold grants together."""


@group.command("create")
@click.argument("name")
@click.pass_context
def group_create(ctx: click.Context, name: str) -> None:
    """Create a group."""
    with _service(ctx) as svc:
        made = svc.create_group(name).to_wire()
    _emit(ctx, made, lambda: [f"created group {made['id']} ({name})"])


@group.command("list")
@click.pass_context
def group_list(ctx: click.Context) -> None:
    """List groups and their members."""
    with _service(ctx) as svc:
        rows = [g.to_wire() for g in svc.list_groups()]
    _emit(ctx, rows, lambda: [
        f"{g['id']}  {g['name']}: {', '.join(g['members']) or '(no members)'}" for g in rows])


@group.command("add")
@click.argument("group_id")
@click.argument("member_id")
@click.pass_context
def group_add(ctx: click.Context, group_id: str, member_id: str) -> None:
    """Put a member in a group."""
    with _service(ctx) as svc:
        made = svc.add_membership(group_id, member_id).to_wire()
    _emit(ctx, made, lambda: [f"{member_id} is in group {group_id}"])


@group.command("remove")
@click.argument("group_id")
@click.argument("member_id")
@click.pass_context
def group_remove(ctx: click.Context, group_id: str, member_id: str) -> None:
    """Take a member out of a group."""
    with _service(ctx) as svc:
        made = svc.remove_membership(group_id, member_id).to_wire()
    _emit(ctx, made, lambda: [f"{member_id} is no longer in group {group_id}"])


# --- credentials -----------------------------------------------------------------------------


@command.group("credential")
def credential() -> None:
    """Bearer credentials (stored hashed; a secret is shown once)."""


@credential.command("create")
@click.argument("member_id")
@click.option("--label", default="", help="A note saying where the credential is used.")
@click.pass_context
def credential_create(ctx: click.Context, member_id: str, label: str) -> None:
    """Mint a credential for a member and print its secret once."""
    with _service(ctx) as svc:
        cred, secret = svc.issue_credential(member_id, label)
    made = {"credential": cred.to_wire(), "secret": secret}
    _emit(ctx, made, lambda: [
        f"credential {cred.id} for {member_id}",
        f"secret (shown once, store it now): {secret}",
    ])


@credential.command("list")
@click.option("--member", "member_id", default=None, help="Only this member's credentials.")
@click.pass_context
def credential_list(ctx: click.Context, member_id: str | None) -> None:
    """List credentials (never their secrets)."""
    with _service(ctx) as svc:
        rows = [c.to_wire() for c in svc.list_credentials(member_id)]
    _emit(ctx, rows, lambda: [
        f"{c['id']}  {c['member_id']}  {'revoked' if c['revoked'] else 'active '}  {c['label']}"
        for c in rows])


@credential.command("revoke")
@click.argument("credential_id")
@click.pass_context
def credential_revoke(ctx: click.Context, credential_id: str) -> None:
    """Revoke a credential; requests bearing it are refused from now on."""
    with _service(ctx) as svc:
        made = svc.revoke_credential(credential_id).to_wire()
    _emit(ctx, made, lambda: [f"revoked {credential_id}"])


# --- grants ----------------------------------------------------------------------------------


def _acting(svc: Any, as_member: str | None) -> Any:
    if as_member is not None:
        return svc.caller(as_member)
    admins = [m for m in svc.list_members() if m.admin]
    if not admins:
        raise NotFound("there is no admin member", code="member_not_found",
                       hint="start pal serve once, or pass --as MEMBER_ID")
    return svc.caller(admins[0].id)


_AS = click.option("--as", "as_member", default=None,
                   help="Act as this member (default: the first admin); it needs delete there.")


@command.group("grant", invoke_without_command=False)
def grant() -> None:
    """Grants: who may do what on a memory (inherited down the tree, no deny)."""


@grant.command("add")
@click.argument("memory_id")
@click.argument("principal")
@click.argument("privileges", nargs=-1, required=True,
                type=click.Choice(["read", "write", "create", "delete"]))
@_AS
@click.pass_context
def grant_add(ctx: click.Context, *, memory_id: str, principal: str, privileges: tuple[str, ...],
              as_member: str | None) -> None:
    """Grant PRINCIPAL (member:ID or group:ID) PRIVILEGES on MEMORY_ID."""
    with _service(ctx) as svc:
        made = svc.put_grant(_acting(svc, as_member), memory_id,
                             {"principal": principal, "privileges": list(privileges)})
    _emit(ctx, made, lambda: [
        f"granted {principal} {' '.join(made['privileges'])} on {memory_id} ({made['id']})"])


@grant.command("list")
@click.argument("memory_id")
@_AS
@click.pass_context
def grant_list(ctx: click.Context, memory_id: str, as_member: str | None) -> None:
    """List the grants that reach MEMORY_ID."""
    with _service(ctx) as svc:
        made = svc.list_grants(_acting(svc, as_member), memory_id)
    _emit(ctx, made, lambda: [
        f"{g['id']}  {g['principal']}  {' '.join(g['privileges'])}  on {g['memory_id']}"
        f"{' (inherited)' if g.get('inherited') else ''}" for g in made.get("data", [])])


@grant.command("revoke")
@click.argument("memory_id")
@click.argument("grant_id")
@_AS
@click.pass_context
def grant_revoke(ctx: click.Context, memory_id: str, grant_id: str, as_member: str | None) -> None:
    """Remove one grant."""
    with _service(ctx) as svc:
        made = svc.delete_grant(_acting(svc, as_member), memory_id, grant_id)
    _emit(ctx, made, lambda: [f"removed grant {grant_id}"])


# --- the server's signing key ----------------------------------------------------------------


@command.group("key")
def key() -> None:
    """The server's Ed25519 signing key (docs/provenance.md)."""


def _key_lines(doc: Wire) -> list[str]:
    return [f"{k['status']:8} {k['key_id']}  {k['public_key']}  since {k['created_at']}"
            + (f" until {k['retired_at']}" if k.get("retired_at") else "")
            for k in doc["keys"]]


@key.command("show")
@click.pass_context
def key_show(ctx: click.Context) -> None:
    """Print the published key set (every public key that signed for this server): the file
    `pal verify --keys` checks against, offline."""
    with _service(ctx) as svc:
        doc = svc.provenance_keys()
    _emit(ctx, doc, lambda: _key_lines(doc))


@key.command("rotate")
@click.pass_context
def key_rotate(ctx: click.Context) -> None:
    """Make a new signing key; the old public key stays published (retired), so everything it
    signed still verifies. A running server picks the new key up on its next write."""
    with _service(ctx) as svc:
        doc = svc.rotate_server_key()
    _emit(ctx, doc, lambda: _key_lines(doc))


# --- mounted repositories --------------------------------------------------------------------


@command.command("mount-repo")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--memory", "memory_id", required=True,
              help="The empty memory whose records the repository's streams become.")
@click.pass_context
def mount_repo(ctx: click.Context, path: Path, memory_id: str) -> None:
    """Make a Git repository's hn-memory/0 streams the provider of an empty memory: its
    verified memories are served read-only, fresh on every read, to whoever may read it."""
    with _service(ctx) as svc:
        doc = svc.mount_repository(memory_id, path)
    _emit(ctx, doc, lambda: [f"mounted {doc['path']} as memory {doc['memory_id']} "
                             f"(provider {doc['provider']})"])


# --- migrate ---------------------------------------------------------------------------------


@command.command("migrate")
@click.pass_context
def migrate(ctx: click.Context) -> None:
    """Convert a data directory written by an older version (store schema 1 or 2) to the
    current store; the original database is kept beside it as palimpsest.schema<N>.db."""
    from palimpsest.service.upgrade import migrate as run  # noqa: PLC0415 — rare command

    directory: Path = (options.value(ctx, "data_dir") or default_data_dir()).expanduser()
    report = run(directory)
    _emit(ctx, report, lambda: [f"{key}: {value}" for key, value in report.items()])


@command.command("migrate-schema")
@click.pass_context
def migrate_schema(ctx: click.Context) -> None:
    """Bring the PostgreSQL database of --database ($PAL_DATABASE_URL) to this version's
    schema (each missing step in its own transaction; safe while another process runs it)."""
    from palimpsest.service.storage import (  # noqa: PLC0415 — rare command
        database_name,
        migrate_database,
    )

    url = _database(ctx)
    if url is None:
        raise InvalidInput("migrate-schema needs the database to migrate", code="no-database",
                           hint="pass --database postgresql://… or set $PAL_DATABASE_URL "
                           "(the embedded store migrates itself: pal admin migrate)")
    found, now = migrate_database(url)
    applied = list(range(found + 1, now + 1))
    report = {"database": database_name(url), "found": found, "schema": now,
              "applied": applied}
    done = f" (applied {', '.join(str(v) for v in applied)})" if applied \
        else " (nothing to apply)"
    _emit(ctx, report, lambda: [f"{report['database']}: schema {now}{done}"])


# --- backup and restore (service/backup.py) ---------------------------------------------------


@command.command("backup")
@click.argument("dest", type=click.Path(path_type=Path, file_okay=False))
@click.pass_context
def backup_cmd(ctx: click.Context, dest: Path) -> None:
    """Copy the store to the new directory DEST, consistently while the server runs: the
    database as of one moment, the file bytes it names, the server's keys, a manifest of
    digests. DEST is itself a data directory; bring it back with pal admin restore."""
    from palimpsest.service.backup import backup  # noqa: PLC0415 — rare command

    report = backup(_store_dir(ctx), dest.expanduser())
    _emit(ctx, report, lambda: [
        f"backed up {report['source']} to {report['path']} ({report['database']['bytes']} "
        f"bytes of database, {report['files']['count']} files, {len(report['keys'])} keys)"])


@command.command("restore")
@click.argument("source", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.pass_context
def restore_cmd(ctx: click.Context, source: Path) -> None:
    """Check the backup SOURCE (its digests, SQLite's integrity check, every file's bytes, a
    rebuild equal to what it stores) and make it the store of --data-dir, which must be a new
    or empty directory; nothing is written when a check fails."""
    from palimpsest.service.backup import restore  # noqa: PLC0415 — rare command

    def rebuild(directory: Path) -> Wire:
        with MemoryService(directory) as svc:
            return svc.rebuild()

    target: Path = (options.value(ctx, "data_dir") or default_data_dir()).expanduser()
    report = restore(source.expanduser(), target, rebuild)
    _emit(ctx, report, lambda: [
        f"restored {report['backup']} (taken {report['backup_created_at']}) into "
        f"{report['path']}: {report['rebuild']['changesets']} changesets, "
        f"{report['rebuild']['records']} records, {report['files']['count']} files; "
        "rebuild equal",
        f"serve it with: pal serve --data-dir {report['path']}"])


# --- rebuild ---------------------------------------------------------------------------------


@command.command("rebuild")
@click.option("--repair", is_flag=True,
              help="write the re-derived projections when they differ from the stored ones")
@click.pass_context
def rebuild(ctx: click.Context, repair: bool) -> None:
    """Re-derive every projection and the search index from the changesets and compare; fail,
    writing nothing, unless the rebuilt state equals the stored one (or --repair is given)."""
    with _service(ctx) as svc:
        report = svc.rebuild(repair=repair)

    def lines() -> list[str]:
        out = [f"{key}: {value}" for key, value in report.items() if key != "differences"]
        return out + [f"differs: {line}" for line in report.get("differences", [])]

    _emit(ctx, report, lines)
    if report.get("equal") is False and not report.get("written"):
        raise InvalidInput("the projections re-derived from the history differ from the "
                           "stored ones; nothing was written", code="rebuild-mismatch",
                           hint="the store was changed outside the service: keep a copy, "
                           "look at the differences, then run pal admin rebuild --repair")
