"""``pal``'s click group, whose subcommands load lazily (run by :func:`palimpsest.cli.main.main`).

Start-up time matters (one ``pal memory record`` must finish, process start to exit, well under a
third of a second), so a command group's module is imported only when that group is invoked:
``pal memory record`` never imports the HTTP service or the MCP SDK.  The warm ``pal memory
recall`` does not even come here (:mod:`palimpsest.cli.fast`).

Every :class:`~palimpsest.errors.PalError` becomes ``pal: <message>`` on stderr and exit code 1.

``--json`` is an option of ``pal`` itself, shared with every command below it (the rule of
:mod:`palimpsest.cli.options`): it is accepted anywhere after ``pal``, and so are a group's own
options (``--data-dir`` of ``pal admin``, ``--url`` of the client commands) after its
subcommands. The loader applies the rule to each command tree it loads.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from palimpsest.cli import options
from palimpsest.errors import PalError
from palimpsest.text import safe_line

# name -> (module[:attribute], help) of a click command or group (the attribute defaults to
# ``command``); add a line to add a command group.
COMMANDS: dict[str, tuple[str, str]] = {
    "id": ("palimpsest.cli.identity_cmd", "Manage the Ed25519 identity that signs memories."),
    "memory": ("palimpsest.cli.memory_cmd", "Record, correct and read repository memory."),
    "demo": ("palimpsest.cli.demo_cmd", "Walk through repository memory in a throw-away repo."),
    "replication": ("palimpsest.cli.replication_cmd", "Select which remote memory sync fetches."),
    "sync": ("palimpsest.cli.sync_cmd", "Fetch, verify and promote remote memory; publish local."),
    "serve": ("palimpsest.cli.serve_cmd", "Run the memory service (UHP Memories over HTTP)."),
    "admin": ("palimpsest.cli.admin_cmd", "Manage members, groups, credentials and grants."),
    "hermes": ("palimpsest.cli.hermes_cmd", "Connect the Hermes agent to Palimpsest memory."),
    "mcp": ("palimpsest.cli.mcp_cmd", "Serve the memory tools to an MCP client over stdio."),
    "export": ("palimpsest.cli.export_cmd",
               "Write the service's signed history as a Git repository."),
    "import": ("palimpsest.cli.import_cmd",
               "Bring an exported history into this server: quarantine, verify, promote."),
    "verify": ("palimpsest.cli.verify_cmd",
               "Check provenance offline: a receipt, or a history exported to Git."),
    "memory-git": ("palimpsest.cli.memory_git_cmd",
                   "Reviewed memory on a server: refs, commits, proposals, signed merges."),
    "memories": ("palimpsest.cli.memories_cmd",
                 "Memories of a running server: list, create, move, grant."),
    "records": ("palimpsest.cli.records_cmd:records",
                "Records of a running server: remember, list, show, revise, forget."),
    "recall": ("palimpsest.cli.records_cmd:recall",
               "Ask a running server's memory (and every readable memory below it)."),
}


class LazyGroup(click.Group):
    """A group that imports each subcommand's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, _, attribute = entry[0].partition(":")
        command = getattr(importlib.import_module(module_name), attribute or "command", None)
        if not isinstance(command, click.Command):
            return None
        options.spread(command, tuple(p for p in self.params if isinstance(p, options.Shared)))
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in sorted(COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="palimpsest", prog_name="pal")
@options.shared("--json", "as_json", is_flag=True,
                help="Print JSON (accepted anywhere after pal, by every command).")
def cli() -> None:
    """Palimpsest: signed, reviewable memory for AI agents."""


def fail(message: str) -> None:
    """Print ``pal: <message>`` (one line, no control bytes) to stderr and exit 1."""
    click.echo(f"pal: {safe_line(message)}", err=True)
    sys.exit(1)


def run(argv: list[str] | None = None) -> Any:
    """Run ``pal`` through click; every failure, usage errors included, exits 1 with one line on
    stderr."""
    try:
        return cli.main(args=argv, prog_name="pal", standalone_mode=False)
    except PalError as exc:
        fail(exc.diagnostics())
    except click.exceptions.Abort:
        fail("aborted")
    except click.ClickException as exc:
        fail(exc.format_message())
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    return None


__all__ = ["COMMANDS", "LazyGroup", "cli", "fail", "run"]
