"""``pal memory policy trust``: trust actors and kinds in ``.hn/policy.json`` (hn-memory-v0.md
§15).

Recall returns only policy-qualified memory by default, and a repository without a ``memory``
section in its policy qualifies nothing.  This command writes that section into the work tree's
``.hn/policy.json`` — the sorted, unique union of what it held and what is given; every other
field keeps its value — creating the file (with the active identity as maintainer) when there
is none.  It writes that one file and nothing else: no commit, no ref.  Trust is read from the
policy in the tree of the query commit, so it takes effect once the file is committed.

Registered on the ``pal memory`` group by :mod:`palimpsest.cli.memory_cmd`; imports only click at
load time.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import click

_ALL = "all"


def _refuse_links(*paths: Path) -> None:
    from palimpsest.errors import InvalidInput  # noqa: PLC0415

    for path in paths:
        if path.is_symlink():
            raise InvalidInput(
                f"{path} is a symlink; refusing to write through it",
                code="unsafe-path",
                hint="replace the link with a regular file or directory",
            )


def _write(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically (a temporary file beside it, fsynced, renamed), keeping its
    mode (0644 for a new file)."""
    path.parent.mkdir(mode=0o755, exist_ok=True)
    mode = stat.S_IMODE(os.lstat(path).st_mode) if path.exists() else 0o644
    tmp = path.parent / f".policy.json.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)  # whatever the umask
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@click.group("policy")
def policy_group() -> None:
    """Edit the memory section of .hn/policy.json (a file to commit)."""


@policy_group.command("trust")
@click.option(
    "--actor", "actors", multiple=True,
    help="Full actor ID to trust (repeatable; default: your active identity).",
)  # fmt: skip
@click.option(
    "--kind", "kinds", multiple=True, required=True,
    help="Record kind to trust, or all (repeatable).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the memory section as JSON.")
@click.pass_context
def trust_cmd(ctx: click.Context, actors: tuple[str, ...], kinds: tuple[str, ...],
              as_json: bool) -> None:  # fmt: skip
    """Trust ACTORs' memories of KINDs: writes the sorted, unique memory section of
    .hn/policy.json in the work tree (commit it to take effect)."""
    from palimpsest.canonical import decode, encode  # noqa: PLC0415
    from palimpsest.errors import InvalidInput, NotFound  # noqa: PLC0415
    from palimpsest.hn import store  # noqa: PLC0415
    from palimpsest.hn.ids import KINDS  # noqa: PLC0415
    from palimpsest.hn.policy import trusting  # noqa: PLC0415
    from palimpsest.identity import load_identity  # noqa: PLC0415

    repo = store.open_repository(ctx.obj["repo"])
    if repo.workdir is None:
        raise InvalidInput(
            "a bare repository has no work tree to write .hn/policy.json into",
            code="no-work-tree", hint="run it in a clone with a work tree, then commit",
        )  # fmt: skip
    wanted = list(KINDS) if _ALL in kinds else list(kinds)
    me: str | None = None
    try:
        me = load_identity(store.git_dir(repo)).actor
    except NotFound:
        if not actors:
            raise
    chosen = list(actors) or [me or ""]
    path = Path(repo.workdir) / ".hn" / "policy.json"
    _refuse_links(path.parent, path)
    existing = path.read_bytes() if path.exists() else None
    data = trusting(existing, chosen, wanted, maintainer=me or chosen[0])
    _write(path, data)
    section = decode(data, trailing_whitespace=True)["memory"]  # trusting() wrote one
    summary: dict[str, Any] = {
        "version": 0,
        "path": ".hn/policy.json",
        "trustedActors": section["trustedActors"],
        "trustedKinds": section["trustedKinds"],
    }
    if as_json:
        sys.stdout.buffer.write(encode(summary) + b"\n")
        sys.stdout.buffer.flush()
        return
    click.echo(f"Wrote {summary['path']}:")
    click.echo("  trusted actors: " + ", ".join(summary["trustedActors"]))
    click.echo("  trusted kinds: " + ", ".join(summary["trustedKinds"]))
    click.echo("Commit it to take effect: git add .hn/policy.json && git commit")


COMMANDS = (policy_group,)

__all__ = ["COMMANDS", "policy_group", "trust_cmd"]
