"""Options that mean the same wherever they stand: ``pal``'s one rule for shared options.

**The rule.** An option of a command group is accepted before *and* after the group's
subcommands, down to every command below it; ``--json`` belongs to the ``pal`` group itself, so
every command takes it anywhere after ``pal``::

    pal --json admin member list
    pal admin --json --data-dir D member list
    pal admin member list --data-dir D --json

all mean the same. When an option is given more than once, the most explicit source wins (the
command line over an environment variable over the default) and, among equals, the occurrence
nearest the command.

A group declares such an option with :func:`shared` and its commands read it with
:func:`value`. A group that hands its option to its commands in ``ctx.obj`` (a dict keyed by
the option's name, as the repository-memory groups do with ``--repo``) declares it with
``expose_value=True`` and keeps doing so: a value given after the subcommand is written into
that same ``ctx.obj`` entry. :func:`spread` copies a group's shared options onto every command
below it when the command tree is loaded (``pal``'s lazy loader calls it), so a command added
later follows the rule without doing anything. A command's own ``--json`` flag (the
repository-memory commands declare one) is replaced by the shared one under the same
parameter name, so its function keeps receiving ``as_json``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

F = TypeVar("F", bound=Callable[..., Any])
_KEY = "palimpsest.cli.shared."


class Shared(click.Option):
    """An option of a group that the commands below it accept too (see the module text)."""

    def __init__(self, param_decls: list[str], **attrs: Any) -> None:
        super().__init__(param_decls, **attrs)
        self.decls = list(param_decls)
        self.attrs = attrs

    def clone(self, *, name: str | None = None, expose_value: bool = False,
              help_text: str | None = None) -> Shared:
        """The same option for a command below the group (by default without a parameter)."""
        decls = [d for d in self.decls if d.startswith("-")] + ([name] if name else
                                                                 [self.name or ""])
        attrs = {**self.attrs, "expose_value": expose_value}
        if help_text:
            attrs["help"] = help_text
        return Shared(decls, **attrs)

    def process_value(self, ctx: click.Context, value: Any) -> Any:
        value = super().process_value(ctx, value)
        source = ctx.get_parameter_source(self.name or "") or ParameterSource.DEFAULT
        key = _KEY + (self.name or "")
        stored = ctx.meta.get(key)
        if stored is None or source <= stored[1]:  # nearer the command, as explicit or more
            ctx.meta[key] = (value, source)
            if (stored is not None and isinstance(ctx.obj, dict) and self.name in ctx.obj
                    and source is ParameterSource.COMMANDLINE):
                ctx.obj[self.name] = value  # the group handed the earlier value this way
        return ctx.meta[key][0]


def shared(*param_decls: str, **attrs: Any) -> Callable[[F], F]:
    """Declare a shared option on a group (``click.option`` arguments; not passed to the
    group's own function unless ``expose_value=True``: commands read it with :func:`value`)."""
    return click.option(*param_decls, cls=Shared, **{"expose_value": False, **attrs})


def value(ctx: click.Context, name: str) -> Any:
    """The resolved value of shared option ``name`` (its parameter name, e.g. ``as_json``)."""
    stored = ctx.meta.get(_KEY + name)
    if stored is None:
        raise RuntimeError(f"no shared option {name!r} above this command")
    return stored[0]


def spread(command: click.Command, inherited: tuple[Shared, ...] = ()) -> None:
    """Give ``command`` (and, for a group, every command below it) the shared options of the
    groups above it; idempotent."""
    for option in inherited:
        _adopt(command, option)
    if isinstance(command, click.Group):
        mine = tuple(p for p in command.params if isinstance(p, Shared))
        for sub in command.commands.values():
            spread(sub, mine)


def _adopt(command: click.Command, option: Shared) -> None:
    flags = set(option.opts)
    for index, param in enumerate(command.params):
        if isinstance(param, click.Option) and flags & set(param.opts):
            if not isinstance(param, Shared):  # the command's own flag: same name, shared value
                command.params[index] = option.clone(name=param.name,
                                                     expose_value=param.expose_value,
                                                     help_text=param.help)
            return
    command.params.append(option.clone())


__all__ = ["Shared", "shared", "spread", "value"]
