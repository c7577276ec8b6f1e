"""``pal hermes install|uninstall``: connect Hermes to the memory service, or undo it.

Install creates a dedicated agent member with only the privileges chosen (read by default;
never delete), issues its credential into a 0600 file inside the Hermes home, copies the
standard-library provider into ``$HERMES_HOME/plugins/palimpsest/``, selects it as
``memory.provider``, registers ``pal mcp`` under ``mcp_servers.palimpsest`` and writes a recall
skill. Uninstall restores what was there before, where nothing changed since, and revokes the
credential. Hermes must be restarted after either.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from palimpsest import canonical
from palimpsest.errors import InvalidInput, NotFound, PalError
from palimpsest.hermes import install as installer
from palimpsest.hermes.settings import ConfigError, parse_url
from palimpsest.service.memories import MemoryService
from palimpsest.text import safe_text

GRANTABLE = ("read", "write", "create")  # delete (erase, grants) is a person's act


def default_hermes_home() -> Path:
    """``$HERMES_HOME``, else ``~/.hermes``."""
    return Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes")


def _pal_executable() -> str:
    beside = Path(sys.executable).with_name("pal")
    return str(beside) if beside.exists() else (shutil.which("pal") or "pal")


def _acting(svc: MemoryService, as_member: str | None) -> Any:
    if as_member is not None:
        return svc.caller(as_member)
    admins = [m for m in svc.list_members() if m.admin]
    if not admins:
        raise NotFound("there is no admin member", code="member_not_found",
                       hint="start pal serve once, or pass --as MEMBER_ID")
    return svc.caller(admins[0].id)


def _emit(report: installer.Report, as_json: bool, lines: list[str]) -> None:
    if as_json:
        click.echo(canonical.encode_indent(report.to_wire()).decode(), nl=False)
        return
    for line in [*lines, report.restart]:
        click.echo(safe_text(line))


def _data_dir(explicit: Path | None) -> Path:
    """The service data directory; the default is resolved by ``pal serve``'s rule, imported
    only when needed (that module loads the whole HTTP app)."""
    if explicit is not None:
        return explicit.expanduser()
    from palimpsest.cli.serve_cmd import default_data_dir  # noqa: PLC0415

    return default_data_dir().expanduser()


@click.group("hermes")
def command() -> None:
    """Connect the Hermes agent to Palimpsest memory."""


@command.command("install")
@click.option("--memory", "memory_id", required=True, help="The memory Hermes recalls from.")
@click.option("--grant", "grants", multiple=True, type=click.Choice(GRANTABLE),
              help="Privilege for the Hermes agent on that memory (repeatable; default read).")
@click.option("--server-url", default="http://127.0.0.1:8765", show_default=True,
              help="Origin of the running `pal serve`.")
@click.option("--name", default="hermes", show_default=True, help="Name of the agent member.")
@click.option("--hermes-home", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Hermes home (default: $HERMES_HOME or ~/.hermes).")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Service data directory (default: $PAL_DATA_DIR or the standard place).")
@click.option("--as", "as_member", default=None, help="Grant as this member (default: an admin).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def install_cmd(*, memory_id: str, grants: tuple[str, ...], server_url: str, name: str,
                hermes_home: Path | None, data_dir: Path | None, as_member: str | None,
                as_json: bool) -> None:
    """Create a dedicated agent member and install the provider into Hermes."""
    home = (hermes_home or default_hermes_home()).expanduser()
    directory = _data_dir(data_dir)
    try:
        url = parse_url(server_url)
    except ConfigError as exc:
        raise InvalidInput(str(exc).replace("PALIMPSEST_HERMES_URL", "--server-url"),
                           code="hermes-url") from exc
    installer.preflight(home)
    privileges = sorted(set(grants or ("read",)), key=GRANTABLE.index)
    with MemoryService(directory) as svc:
        member = svc.create_member(name, "agent")
        credential, secret = svc.issue_credential(member.id, label="hermes")
        try:
            svc.put_grant(_acting(svc, as_member), memory_id,
                          {"principal": f"member:{member.id}", "privileges": privileges})
            command_line = (_pal_executable(), "mcp", "--data-dir", str(directory),
                            "--credential-file", str(installer.Paths(home).credential),
                            "--memory", memory_id)
            report = installer.install(home, installer.InstallRequest(
                server_url=url, memory_id=memory_id, secret=secret, mcp_command=command_line,
                member_id=member.id, credential_id=credential.id))
        except PalError:
            svc.revoke_credential(credential.id)
            raise
    _emit(report, as_json, [
        f"created agent member {member.id} ({' '.join(privileges)} on {memory_id})",
        f"installed the provider into {installer.Paths(home).plugin_dir}",
        "memory.provider is now palimpsest; MCP server `palimpsest` registered",
    ])


@command.command("uninstall")
@click.option("--hermes-home", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Hermes home (default: $HERMES_HOME or ~/.hermes).")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Service data directory, to revoke the agent's credential.")
@click.option("--keep-credential", is_flag=True, help="Do not revoke the agent's credential.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def uninstall_cmd(hermes_home: Path | None, data_dir: Path | None, keep_credential: bool,
                  as_json: bool) -> None:
    """Remove the provider and restore Hermes' previous settings where unchanged since."""
    home = (hermes_home or default_hermes_home()).expanduser()
    report = installer.uninstall(home)
    if report.credential_id and not keep_credential:
        directory = _data_dir(data_dir)
        # NotFound: already revoked by an operator
        with MemoryService(directory) as svc, contextlib.suppress(NotFound):
            svc.revoke_credential(report.credential_id)
    _emit(report, as_json, [
        *(f"restored {key}" for key in report.restored if "." in key and "/" not in key),
        *(f"left unchanged (modified since install): {item}" for item in report.kept),
        f"removed {len(report.removed)} files",
    ])
