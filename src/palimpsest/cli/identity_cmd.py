"""``pal id``: create, show, export and import the Ed25519 identity that signs memories.

Private keys live only below ``<git-dir>/hn/`` (directories 0700, files 0600, atomic writes,
symlinks refused) and never in a commit.  ``export`` prints the private key document: treat its
output as a secret.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from palimpsest.canonical import encode
from palimpsest.cli import options
from palimpsest.errors import InvalidInput
from palimpsest.hn import store
from palimpsest.hn.envelope import default_stream
from palimpsest.identity import (
    Identity,
    check_name,
    export_document,
    import_document,
    load_identity,
    new_identity,
    save_identity,
    write_private,
)
from palimpsest.text import safe_line

_MAX_DOCUMENT = 4096


def _summary(identity: Identity) -> dict[str, object]:
    return {
        "version": 0,
        "name": identity.name,
        "actor": identity.actor,
        "publicKey": identity.public_key_text,
        "defaultStream": default_stream(identity.actor),
    }


def _print(identity: Identity, as_json: bool) -> None:
    if as_json:
        sys.stdout.buffer.write(encode(_summary(identity)) + b"\n")
        sys.stdout.buffer.flush()
        return
    click.echo(f"Name: {safe_line(identity.name)}")
    click.echo(f"Actor: {identity.actor}")
    click.echo(f"Public key: {identity.public_key_text}")
    click.echo(f"Default stream: {default_stream(identity.actor)}")


@click.group(name="id")
@options.shared("--repo", expose_value=True, default=".", type=click.Path(file_okay=False),
                help="Repository.")
@click.pass_context
def command(ctx: click.Context, repo: str) -> None:
    """Manage the Ed25519 identity that signs this repository's memories."""
    ctx.obj = {"repo": repo}


@command.command("init")
@click.option("--name", required=True, help="Display name written into every memory.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def init_cmd(ctx: click.Context, name: str, as_json: bool) -> None:
    """Create a new identity and make it the active one."""
    repo = store.open_repository(ctx.obj["repo"])
    identity = new_identity(check_name(name))
    store.ident_name(identity.name)
    save_identity(store.git_dir(repo), identity)
    _print(identity, as_json)


@command.command("show")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show_cmd(ctx: click.Context, as_json: bool) -> None:
    """Show the active identity (public parts only)."""
    repo = store.open_repository(ctx.obj["repo"])
    _print(load_identity(store.git_dir(repo)), as_json)


@command.command("export")
@click.option(
    "--output", default=None, help="Write the secret document to this new file (mode 0600)."
)
@click.pass_context
def export_cmd(ctx: click.Context, output: str | None) -> None:
    """Print the active identity's private key document (a secret; keep it safe)."""
    repo = store.open_repository(ctx.obj["repo"])
    document = export_document(load_identity(store.git_dir(repo)))
    if output is None:
        sys.stdout.buffer.write(document)
        sys.stdout.buffer.flush()
        return
    path = Path(output)
    if path.exists() or path.is_symlink():
        raise InvalidInput(f"{output} already exists; choose a new file", code="exists")
    write_private(path, document)


@command.command("import")
@click.argument("source")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def import_cmd(ctx: click.Context, source: str, as_json: bool) -> None:
    """Import a private key document (file or - for stdin) and make it active."""
    repo = store.open_repository(ctx.obj["repo"])
    try:
        if source == "-":
            data = sys.stdin.buffer.read(_MAX_DOCUMENT + 1)
        else:
            with open(source, "rb") as handle:
                data = handle.read(_MAX_DOCUMENT + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read {source}: {exc.strerror}", code="unreadable") from exc
    identity = import_document(data)
    store.ident_name(identity.name)
    save_identity(store.git_dir(repo), identity)
    _print(identity, as_json)
