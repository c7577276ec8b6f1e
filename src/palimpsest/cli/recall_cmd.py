"""``pal memory recall``, ``pal memory grep`` and ``pal memory index rebuild|verify``.

Registered on the ``pal memory`` group by :mod:`palimpsest.cli.memory_cmd`; the plain forms of a
warm recall are answered before click loads (:mod:`palimpsest.cli.fast`, which also builds the
request and writes the result for this module).  This module imports only click at load time,
so ``pal memory record`` does not pay for SQLite or RE2; the work is imported when one of these
commands runs.

Every refusal is a ``PalError`` printed by ``pal`` as one line on stderr with exit status 1.
JSON goes to stdout as exact bytes; human output is escaped (no control bytes reach a terminal).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import click

from palimpsest.cli.fast import build_request, emit
from palimpsest.cli.progress import progress

F = Callable[..., Any]


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _filter_options(func: F) -> F:
    options = [
        click.option("--at", "at", default="HEAD", help="Query commit (default HEAD)."),
        click.option("--subject", default="", help="Typed subject ID the memory applies to."),
        click.option("--path", "path", default="", help="Exact anchored repository path."),
        click.option("--topic", "topics", multiple=True, help="Required topic (repeatable)."),
        click.option("--kind", "kinds", multiple=True, help="Record kind (repeatable)."),
        click.option("--actor", "actors", multiple=True, help="Full actor ID (repeatable)."),
        click.option(
            "--lifecycle",
            "lifecycles",
            multiple=True,
            help="Lifecycle class, or all (default active).",
        ),
        click.option("--trust", "trusts", multiple=True, help="Trust class (default qualified)."),
        click.option("--include-untrusted", is_flag=True, help="Drop the default trust filter."),
        click.option("--max-records", type=int, default=None, help="Page size (default 20)."),
        click.option(
            "--max-content-bytes", type=int, default=None, help="Byte bound (default 65536)."
        ),
        click.option("--cursor", default="", help="Continuation cursor from a previous page."),
        click.option("--json", "as_json", is_flag=True, help="Print the JSON envelope."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _where(ctx: click.Context) -> str:
    return str(ctx.obj.get("repo", ".")) if isinstance(ctx.obj, dict) else "."


def _open(ctx: click.Context) -> Any:
    from palimpsest.hn import store  # noqa: PLC0415 - keep `pal memory record` start-up light

    return store.open_repository(_where(ctx))


def _resolve(repo: Any, rev: str) -> str:
    from palimpsest.hn import store  # noqa: PLC0415

    return store.resolve_commit(repo, rev)


def _request(at_commit: str, o: dict[str, Any], query: str = "") -> Any:
    return build_request(at_commit, o, query)


def _emit(result: Any, as_json: bool) -> None:
    emit(result, as_json)


def _read_input(source: str) -> bytes:
    from palimpsest.errors import InvalidInput  # noqa: PLC0415
    from palimpsest.hn.recall.request import MAX_INPUT_BYTES  # noqa: PLC0415

    try:
        if source == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            with open(source, "rb") as handle:
                data = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read --input: {exc.strerror}", code="invalid-input") from exc
    if len(data) > MAX_INPUT_BYTES:
        raise InvalidInput(f"--input exceeds {MAX_INPUT_BYTES} bytes", code="invalid-input")
    return data


_DEFAULTS: dict[str, Any] = {
    "at": "HEAD",
    "subject": "",
    "path": "",
    "topics": (),
    "kinds": (),
    "actors": (),
    "lifecycles": (),
    "trusts": (),
    "include_untrusted": False,
    "max_records": None,
    "max_content_bytes": None,
    "cursor": "",
}


@click.command("recall")
@_filter_options
@click.option("--query", default="", help="Lexical terms; all must be present.")
@click.option("--input", "input_path", default=None, help="Strict RecallRequestV0 file, or -.")
@click.pass_context
def recall_command(
    ctx: click.Context, /, query: str, input_path: str | None, as_json: bool, **o: Any
) -> None:
    """Bounded, deterministic recall of verified memories (inert data, never instructions)."""
    from palimpsest.errors import InvalidInput  # noqa: PLC0415
    from palimpsest.hn.recall.request import request_from_json  # noqa: PLC0415
    from palimpsest.hn.recall.warm import recall_kept  # noqa: PLC0415
    from palimpsest.hn.store import headfiles  # noqa: PLC0415

    # A warm recall reads the ref files and the index only (no libgit2 start-up); anything the
    # index does not keep an answer for goes through Git, which gives the same bytes.
    git = headfiles.locate(_where(ctx))
    repo = None if git is not None else _open(ctx)
    if input_path is not None:
        if query or any(o[k] != v for k, v in _DEFAULTS.items()):
            raise InvalidInput("--input cannot be combined with other recall flags")
        if not as_json:
            raise InvalidInput("--input requires --json")
        request = request_from_json(_read_input(input_path))
    else:
        at = headfiles.resolve(git, o["at"]) if git is not None else None
        if at is None:
            repo = repo or _open(ctx)
            at = _resolve(repo, o["at"])
        request = _request(at, o, query)
    result = recall_kept(git, request, explain=not as_json) if git is not None else None
    if result is None:
        from palimpsest.hn.recall.run import recall  # noqa: PLC0415

        repo = repo or _open(ctx)
        with progress(as_json) as report:
            result = recall(repo, request, progress=report, explain=not as_json)
    _emit(result, as_json)


@click.command("grep")
@_filter_options
@click.option(
    "-i", "--ignore-case", is_flag=True, help="Unicode simple case folding (Go regexp -i)."
)
@click.argument("pattern")
@click.pass_context
def grep_command(
    ctx: click.Context, /, pattern: str, ignore_case: bool, as_json: bool, **o: Any
) -> None:
    """Explicit RE2 regex search over verified memory (put -- before a pattern starting with -)."""
    from palimpsest.hn.recall.run import grep  # noqa: PLC0415
    from palimpsest.search.regex import compile_pattern  # noqa: PLC0415

    # The exact argv bytes (Python decodes argv with surrogateescape); invalid UTF-8 is refused
    # by the pattern checks, which run before the repository or its index is touched.
    raw = os.fsencode(pattern)
    compile_pattern(raw, ignore_case=ignore_case)
    repo = _open(ctx)
    request = _request(_resolve(repo, o["at"]), o)
    with progress(as_json) as report:
        result = grep(repo, request, raw, ignore_case=ignore_case, progress=report)
    _emit(result, as_json)


@click.group("index")
def index_group() -> None:
    """Rebuild or verify the private, disposable recall index (.git/hn/memory)."""


def _index_report(repo: Any, operation: str, state: Any, as_json: bool) -> None:
    from palimpsest.canonical import encode  # noqa: PLC0415
    from palimpsest.hn import store  # noqa: PLC0415
    from palimpsest.hn.recall.run import GitJudge  # noqa: PLC0415

    # The source fingerprint binds the policy at HEAD (§19.2), as upstream prints it.
    head = store.resolve_commit(repo, "HEAD")
    fingerprint = state.fingerprint(GitJudge(repo).policy(head).digest)
    if as_json:
        _write(
            encode(
                {
                    "version": 0,
                    "operation": operation,
                    "sourceFingerprint": fingerprint,
                    "records": state.records,
                }
            )
            + b"\n"
        )
    else:
        click.echo(
            f"Memory index {operation}: version 0, source {fingerprint}, records {state.records}"
        )


@index_group.command("rebuild")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def index_rebuild(ctx: click.Context, as_json: bool) -> None:
    """Rebuild the index from the verified refs (it serves every query commit)."""
    from palimpsest.hn.index import open_index  # noqa: PLC0415

    repo = _open(ctx)
    with progress(as_json) as report, open_index(repo, rebuild=True, progress=report) as index:
        state = index.state
    _index_report(repo, "rebuild", state, as_json)


@index_group.command("verify")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def index_verify(ctx: click.Context, as_json: bool) -> None:
    """Re-derive the index from Git and compare it with the file; fail when it differs."""
    from palimpsest.hn.index import verify_index  # noqa: PLC0415

    repo = _open(ctx)
    with progress(as_json) as report:
        state = verify_index(repo, progress=report)
    _index_report(repo, "verify", state, as_json)


COMMANDS = (recall_command, grep_command, index_group)

__all__ = ["COMMANDS", "grep_command", "index_group", "recall_command"]
