"""``pal mcp``: serve the memory tools to one MCP client over stdio.

The agent is authenticated once, at start, from a credential file (0600) or ``PAL_CREDENTIAL``;
every tool call then runs as that member through the service facade on the data directory, so
the agent reaches exactly what its grants allow. Started inside a Git repository, it also offers
the repository-memory tools (recall, grep, show, prime; and, with ``--allow-repo-writes``,
record, handoff, supersede, retract, challenge) over that repository. With no service
configured (no data directory, credential file or ``PAL_CREDENTIAL``) it serves the repository
tools alone; a configured service that fails is an error, never a repository-only start.
Stdout carries the MCP protocol only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import anyio
import click

from palimpsest.cli import options
from palimpsest.errors import InvalidInput, NotFound
from palimpsest.mcp import clients
from palimpsest.service.memories import MemoryService
from palimpsest.service.memorygit.wiring import open_flow

MAX_SECRET_BYTES = 4096


def read_secret(path: Path | None) -> str:
    """The credential from a private file, else from ``PAL_CREDENTIAL``."""
    if path is None:
        secret = os.environ.get("PAL_CREDENTIAL", "").strip()
        if not secret:
            raise InvalidInput("no credential: pass --credential-file or set PAL_CREDENTIAL",
                               code="mcp-credential")
        return secret
    try:
        info = path.stat()
        data = path.read_bytes()[: MAX_SECRET_BYTES + 1]
    except OSError as exc:
        raise InvalidInput(f"cannot read the credential file {path}",
                           code="mcp-credential") from exc
    if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o077:
        raise InvalidInput(f"the credential file {path} must be a regular file with mode 0600",
                           code="mcp-credential", hint=f"chmod 600 {path}")
    secret = data.decode("ascii", errors="replace").strip()
    if not secret or len(secret) > MAX_SECRET_BYTES:
        raise InvalidInput(f"the credential file {path} holds no credential",
                           code="mcp-credential")
    return secret


def _data_dir(explicit: Path | None) -> Path:
    """The service data directory; the default is resolved by ``pal serve``'s rule, imported
    only when needed (that module loads the whole HTTP app)."""
    if explicit is not None:
        return explicit.expanduser()
    from palimpsest.cli.serve_cmd import default_data_dir  # noqa: PLC0415

    return default_data_dir().expanduser()


def _repository(explicit: Path | None) -> str | None:
    """The Git directory of ``--repo`` (which must be a repository: it was asked for), else of
    the repository containing the working directory, else ``None``."""
    from palimpsest.hn import store  # noqa: PLC0415 - pygit2 only when serving

    if explicit is not None:
        return str(store.git_dir(store.open_repository(explicit.expanduser())))
    try:
        return str(store.git_dir(store.open_repository(Path.cwd())))
    except NotFound:
        return None


def service_configured(data_dir: Path | None, credential_file: Path | None) -> bool:
    """A service is configured when ``pal mcp`` is told where or as whom to reach it: a data
    directory, a credential file or ``PAL_CREDENTIAL``. Then it must work: no fallback."""
    return (data_dir is not None or credential_file is not None
            or bool(os.environ.get("PAL_CREDENTIAL", "").strip()))


def serve(data_dir: Path | None, credential_file: Path | None, default_memory: str | None, *,
          allow_repo_writes: bool = False, repo_path: Path | None = None) -> None:
    """Serve over stdio: the service (and the repository's tools inside one), or, with no
    service configured, the repository's tools alone.

    Raises:
        InvalidInput: no service configured outside a Git repository; a configured service
            whose credential is missing or refused (never a silent repository-only start).
    """
    repo = _repository(repo_path)
    if not service_configured(data_dir, credential_file):
        if repo is None:
            raise InvalidInput(
                "nothing to serve: not inside a Git repository and no memory service configured",
                code="mcp-nothing-to-serve",
                hint="start pal mcp inside a repository, or pass --credential-file (or set "
                     "PAL_CREDENTIAL) for the service")
        if default_memory is not None:
            raise InvalidInput("--memory needs a memory service (--credential-file)",
                               code="mcp-credential")
        from palimpsest.mcp.server import serve_stdio  # noqa: PLC0415

        anyio.run(lambda: serve_stdio(None, None, repo=repo, repo_writes=allow_repo_writes))
        return
    secret = read_secret(credential_file)
    directory = _data_dir(data_dir)
    with MemoryService(directory) as svc:
        caller = svc.authenticate(secret)
        # the SDK is imported only once the credential is accepted: refusals stay fast
        from palimpsest.mcp.server import serve_stdio  # noqa: PLC0415

        flow = open_flow(svc)
        anyio.run(lambda: serve_stdio(svc, caller, default_memory=default_memory, flow=flow,
                                      repo=repo, repo_writes=allow_repo_writes))


@click.group("mcp", invoke_without_command=True)
@options.shared("--data-dir", "data_dir", type=click.Path(path_type=Path, file_okay=False),
                default=None, help="Service data directory (default: $PAL_DATA_DIR or the "
                "standard place); configures the service.")
@options.shared("--credential-file", "credential_file",
                type=click.Path(path_type=Path, dir_okay=False), default=None,
                help="File holding the agent's credential (mode 0600); configures the service.")
@options.shared("--memory", "default_memory", default=None,
                help="Default memory for memory_remember when the agent names none.")
@options.shared("--repo", "repo_path", type=click.Path(path_type=Path, file_okay=False),
                default=None, help="The Git repository whose memory to serve (default: the one "
                "containing the working directory).")
@options.shared("--allow-repo-writes", "allow_repo_writes", is_flag=True,
                help="Offer repo_memory_record, _handoff, _supersede, _retract and _challenge "
                "(off by default).")
@click.pass_context
def command(ctx: click.Context) -> None:
    """Serve the memory tools to an MCP client over stdio.

    Inside a Git repository with no service configured, only that repository's memory tools;
    with a service (--credential-file or PAL_CREDENTIAL), the service's tools as one
    authenticated agent, and the repository's too when started inside one.
    """
    if ctx.invoked_subcommand is not None:
        return
    serve(options.value(ctx, "data_dir"), options.value(ctx, "credential_file"),
          options.value(ctx, "default_memory"),
          allow_repo_writes=options.value(ctx, "allow_repo_writes"),
          repo_path=options.value(ctx, "repo_path"))


# ----- install / uninstall: the client's project config for this repository ---------------

def _pal_executable() -> str:
    beside = Path(sys.executable).with_name("pal")
    return str(beside) if beside.exists() else (shutil.which("pal") or "pal")


def _work_tree(ctx: click.Context) -> tuple[Path, Path]:
    """The repository's work tree (where the client's config lives) and its Git directory."""
    from palimpsest.hn import store  # noqa: PLC0415

    explicit = options.value(ctx, "repo_path")
    repo = store.open_repository(explicit.expanduser() if explicit else Path.cwd())
    if repo.workdir is None:
        raise InvalidInput("a bare repository has no work tree for a client config",
                           code="not-a-work-tree")
    return Path(repo.workdir).resolve(), store.git_dir(repo)


def _serve_args(ctx: click.Context, root: Path) -> list[str]:
    """The arguments of `pal mcp` as installed: this repository, and the options given."""
    args = ["mcp", "--repo", str(root)]
    for name, flag in (("data_dir", "--data-dir"), ("credential_file", "--credential-file")):
        value = options.value(ctx, name)
        if value is not None:
            args += [flag, str(Path(value).expanduser().resolve())]
    if options.value(ctx, "default_memory") is not None:
        args += ["--memory", options.value(ctx, "default_memory")]
    if options.value(ctx, "allow_repo_writes"):
        args.append("--allow-repo-writes")
    return args


def _journal_path(git_dir: Path, client: str) -> Path:
    from palimpsest.identity import private_dir  # noqa: PLC0415

    return private_dir(git_dir, "mcp-clients") / f"{client}.json"


def _read_journal(path: Path) -> dict[str, Any] | None:
    from palimpsest.identity import read_private  # noqa: PLC0415

    try:
        value = json.loads(read_private(path))
    except NotFound:
        return None
    except ValueError as exc:
        raise InvalidInput(f"the install journal {path} is corrupt; delete it",
                           code="invalid-journal") from exc
    return value if isinstance(value, dict) else None


def _write_journal(path: Path, journal: dict[str, Any] | None) -> None:
    from palimpsest.identity import write_private  # noqa: PLC0415

    if journal is None:
        path.unlink(missing_ok=True)
    else:
        write_private(path, json.dumps(journal, indent=2).encode("utf-8") + b"\n")


def _report(ctx: click.Context, report: dict[str, Any], line: str) -> None:
    if options.value(ctx, "as_json"):
        click.echo(json.dumps(report, ensure_ascii=False))
    else:
        click.echo(line)


@command.command("install")
@click.option("--client", type=click.Choice(sorted(clients.CLIENTS)), required=True,
              help="Which client's project config to write.")
@click.option("--name", default=clients.DEFAULT_NAME, show_default=True,
              help="The server's name in the config.")
@click.option("--print", "print_only", is_flag=True,
              help="Print the config that would be written; write nothing.")
@click.pass_context
def install_cmd(ctx: click.Context, client: str, name: str, print_only: bool) -> None:
    """Add `pal mcp` for this repository to a client's project config (idempotent; other
    entries are kept). The serve options given (--allow-repo-writes, …) go into the entry."""
    root, git_dir = _work_tree(ctx)
    path = clients.config_path(root, client)
    journal_path = _journal_path(git_dir, client)
    entry = clients.server_entry(_pal_executable(), _serve_args(ctx, root))
    document = clients.read_config(path)
    original = path.read_text("utf-8") if document is not None else ""
    plan = clients.plan_install(document, _read_journal(journal_path), path=path, name=name,
                                entry=entry, original=original)
    if plan.action == "created" and plan.journal is not None:
        plan.journal["createdDir"] = not path.parent.exists()
    report = {"client": client, "path": str(path), "name": name, "action": plan.action,
              "entry": entry}
    if print_only:
        shown = plan.document or {}
        if options.value(ctx, "as_json"):
            click.echo(json.dumps({**report, "document": shown}, ensure_ascii=False))
        else:
            sys.stdout.write(clients.render_config(shown).decode("utf-8"))
        return
    if plan.action != "unchanged":
        _write_journal(journal_path, plan.journal)  # first, so a crash can still be undone
        clients.write_config(path, plan.document)
    _report(ctx, report, f"{plan.action}: {name} in {path}")


@command.command("uninstall")
@click.option("--client", type=click.Choice(sorted(clients.CLIENTS)), required=True,
              help="Which client's project config to restore.")
@click.pass_context
def uninstall_cmd(ctx: click.Context, client: str) -> None:
    """Remove what `pal mcp install` wrote, if it is still what it wrote (an entry changed
    since is reported and left alone); the file is as it was before."""
    root, git_dir = _work_tree(ctx)
    path = clients.config_path(root, client)
    journal_path = _journal_path(git_dir, client)
    journal = _read_journal(journal_path)
    plan = clients.plan_uninstall(clients.read_config(path), journal, path=path)
    if plan.action in ("restored", "removed"):
        clients.write_config(path, plan.document, plan.text)
        if plan.action == "removed" and journal and journal.get("createdDir"):
            with contextlib.suppress(OSError):  # only if still empty
                path.parent.rmdir()
    _write_journal(journal_path, plan.journal)
    name = journal.get("name", clients.DEFAULT_NAME) if journal else clients.DEFAULT_NAME
    lines = {"restored": f"restored {path}: {name} removed",
             "removed": f"removed {path} (pal mcp install had created it)",
             "kept": f"kept {name} in {path}: it changed since pal mcp install wrote it",
             "absent": f"nothing to undo: pal mcp install wrote no {client} entry here"}
    _report(ctx, {"client": client, "path": str(path), "name": name, "action": plan.action},
            lines[plan.action])
