"""``pal memory prime``: the standing context of the repository at a commit, for a session start.

Registered on the ``pal memory`` group by :mod:`palimpsest.cli.memory_cmd`. Without ``--json`` it
prints the fenced text an agent receives (the note, then the JSON inside ``<untrusted-data>``),
which is what a Claude Code ``SessionStart`` hook adds to the session and exactly the text of the
MCP tool ``repo_memory_prime``; with ``--json`` the bare JSON document
(:mod:`palimpsest.hn.prime`). Both fit the budget.
"""

from __future__ import annotations

import sys

import click


@click.command("prime")
@click.option("--at", "at", default="HEAD", help="Query commit (default HEAD).")
@click.option("--budget", type=int, required=True,
              help="Token budget of the whole answer (1 to 1000000; about 4 bytes a token).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document only.")
@click.pass_context
def prime_cmd(ctx: click.Context, at: str, budget: int, as_json: bool) -> None:
    """Open handoffs, active decisions and latest verifications, within a token budget."""
    from palimpsest.hn import store  # noqa: PLC0415 - keep `pal memory record` start-up light
    from palimpsest.hn.prime import check_budget, prime  # noqa: PLC0415
    from palimpsest.hn.show import fenced  # noqa: PLC0415

    check_budget(budget)
    where = str(ctx.obj.get("repo", ".")) if isinstance(ctx.obj, dict) else "."
    repo = store.open_repository(where)
    document = prime(repo, store.resolve_commit(repo, at), budget)
    out = document if as_json else (fenced(document) + "\n").encode("utf-8")
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()


COMMANDS = (prime_cmd,)
