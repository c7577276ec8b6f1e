"""What the client commands share: the connection options, the client, output, and errors.

``pal memories``, ``pal records``, ``pal recall`` and ``pal memory-git`` are clients of a
running ``pal serve`` (never a second writer on its data directory), built on
:class:`palimpsest.client.Client`. Connection: ``--url`` (or ``$PAL_URL``, default
``http://127.0.0.1:8765``) and a credential from ``--credential-file`` (a private file) or
``$PAL_CREDENTIAL``; both go before or after the subcommand (:mod:`.options`).

Output is the server's JSON with ``--json``; otherwise lines made inert by
:func:`~palimpsest.text.safe_text` (author text never reaches a terminal as control bytes).
A refusal keeps the server's reason and code, and its hint is said in terms of ``pal``
commands instead of HTTP routes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from palimpsest import canonical
from palimpsest.cli import options
from palimpsest.client import ANSWERED, DEFAULT_URL, Client, read_credential
from palimpsest.errors import InvalidInput, PalError
from palimpsest.text import safe_text

F = TypeVar("F", bound=Callable[..., Any])

# Routes a server message may name, and the command that does the same from here.
_COMMAND_FOR = {
    "GET /v1/memories": "`pal memories list`",
    "GET /v1/memories/providers": "`pal memories providers`",
    "POST /v1/files": "`pal records remember --file PATH`",
}
_ROUTE = re.compile(r"\b(?:GET|POST|PUT|PATCH|DELETE) /[\w/{}.-]*")
# What to do next, by the server's code, for a person at a terminal.
_HINTS = {
    "memory_not_found": "list the memories you can reach with `pal memories list`",
    "memory_record_not_found": "list the memory's records with `pal records list MEMORY_ID`",
    "memory_forbidden": "ask a member holding delete on the memory for a grant "
                        "(`pal memories grant MEMORY_ID member:YOUR_ID PRIVILEGE`)",
    "invalid_credential": "pass --credential-file FILE or set $PAL_CREDENTIAL; "
                          "`pal admin credential create MEMBER_ID` mints one",
}
# Memory Git (/api/memory) says the same refusals in its own kebab-case codes.
_HINTS |= {"not-found": _HINTS["memory_not_found"], "forbidden": _HINTS["memory_forbidden"],
           "invalid-credential": _HINTS["invalid_credential"]}


def _commands(text: str) -> str:
    return _ROUTE.sub(lambda m: _COMMAND_FOR.get(m.group(0), m.group(0)), text)


def for_terminal(exc: PalError) -> PalError:
    """The same refusal (class and code), its hint in ``pal`` terms; a refusal of the server
    also shows the server's code."""
    from_server = any(str(n).startswith(ANSWERED) for n in getattr(exc, "__notes__", ()))
    message = _commands(exc.message)
    if from_server and exc.code not in message and not exc.code.startswith("http-"):
        message = f"{message} ({exc.code})"
    hint = _HINTS.get(exc.code) or (_commands(exc.hint) if exc.hint else None)
    said = type(exc)(message, code=exc.code, hint=hint)
    for note in getattr(exc, "__notes__", ()):
        said.add_note(note)
    return said


class _Refusals:
    """Mixin: a PalError leaving the command is said for a person (:func:`for_terminal`;
    saying it twice changes nothing)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except PalError as exc:
            raise for_terminal(exc) from exc


class ClientGroup(_Refusals, click.Group):
    """A group of client commands."""


class ClientCommand(_Refusals, click.Command):
    """A single client command."""


def connection(fn: F) -> F:
    """The ``--url`` and ``--credential-file`` options (shared with the commands below)."""
    fn = options.shared("--url", "url", envvar="PAL_URL", default=DEFAULT_URL,
                        show_default=True, help="Base URL of the running server ($PAL_URL).")(fn)
    return options.shared("--credential-file", "credential_file", default=None,
                          type=click.Path(path_type=Path, dir_okay=False),
                          help="File holding your bearer credential, mode 0600 "
                          "(else $PAL_CREDENTIAL).")(fn)


def client(ctx: click.Context) -> Client:
    """The client for this invocation (made once, closed when the command ends)."""
    made = ctx.meta.get("palimpsest.cli.client")
    if isinstance(made, Client):
        return made
    credential = read_credential(options.value(ctx, "credential_file"))
    if credential is None:
        raise InvalidInput("no credential", code="no-credential",
                           hint="pass --credential-file FILE or set $PAL_CREDENTIAL "
                           "(`pal admin credential create MEMBER_ID` mints one)")
    made = Client(options.value(ctx, "url"), credential, timeout=60.0)
    ctx.meta["palimpsest.cli.client"] = made
    ctx.call_on_close(made.close)
    return made


def as_json(ctx: click.Context) -> bool:
    """Whether ``--json`` was given anywhere."""
    return bool(options.value(ctx, "as_json"))


def emit(ctx: click.Context, doc: Any, human: Callable[[], Iterable[str]]) -> None:
    """Print ``doc`` as JSON with ``--json``, else the human lines (made inert)."""
    if as_json(ctx):
        click.echo(canonical.encode_indent(doc).decode("utf-8"), nl=False)
        return
    for line in human():
        click.echo(safe_text(line))


def parse_attributes(pairs: Iterable[str]) -> dict[str, Any] | None:
    """``KEY=VALUE`` pairs as an attributes object: ``true``, ``false``, ``null``, numbers and
    quoted JSON strings are JSON values, anything else is the literal text.

    Raises:
        InvalidInput: a pair without ``=`` or with an empty key.
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise InvalidInput(f"--attr {pair!r} is not KEY=VALUE", code="invalid-attribute",
                               hint="write e.g. --attr account=acme --attr standing=true")
        try:
            out[key] = canonical.decode(raw.encode(), allow_floats=True) if raw else ""
        except PalError:
            out[key] = raw
        if isinstance(out[key], dict | list):
            out[key] = raw  # only scalars: structures go in a JSON body (the Python client)
    return out or None


__all__ = ["ClientCommand", "ClientGroup", "as_json", "client", "connection", "emit",
           "for_terminal", "parse_attributes"]
