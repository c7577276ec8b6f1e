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

import os
import stat
from pathlib import Path

import anyio
import click

from palimpsest.cli import options
from palimpsest.errors import InvalidInput, NotFound
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
