"""``pal memory``: record, handoff, supersede, retract, challenge and show repository memory.

A thin edge over :mod:`palimpsest.hn`: flags become requests, requests become signed envelopes,
results are printed as JSON (``--json``, compact plus LF, upstream-compatible) or as escaped
human text.  ``pal`` imports this module only when the ``memory`` group runs, so other
commands never pay for pygit2 and cryptography.  Every refusal raises a ``PalError`` that
``pal`` prints as one line on stderr with exit status 1, before anything is written.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from palimpsest.cli import options
from palimpsest.errors import Forbidden, InvalidInput

if TYPE_CHECKING:
    from pathlib import Path

    import pygit2

    from palimpsest.hn.envelope import Record, VerifiedMemory
    from palimpsest.identity import Identity

# Everything else is imported inside the commands that use it: ``pal memory recall`` (the
# command agents run most) must not pay for libgit2, cryptography or the author path.

F = Callable[..., Any]


def _out_json(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _context(ctx: click.Context) -> tuple[pygit2.Repository, Path]:
    from palimpsest.hn import store  # noqa: PLC0415

    repo = store.open_repository(ctx.obj["repo"])
    return repo, store.git_dir(repo)


def _identity(git_dir: Path, actor: str | None) -> Identity:
    from palimpsest.identity import load_identity  # noqa: PLC0415

    identity = load_identity(git_dir)
    if actor and actor != identity.actor:
        raise Forbidden(
            "--actor must be the active identity",
            code="actor-mismatch",
            hint="switch identity with `pal id import` or drop --actor",
        )
    return identity


def _read_input(source: str) -> bytes:
    from palimpsest.hn.author import MAX_INPUT_BYTES  # noqa: PLC0415

    try:
        if source == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            with open(source, "rb") as handle:
                data = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read --input {source}: {exc.strerror}") from exc
    if len(data) > MAX_INPUT_BYTES:
        raise InvalidInput(f"--input exceeds {MAX_INPUT_BYTES} bytes", code="invalid-request")
    return data


def _submit(repo: pygit2.Repository, operation: str, input_path: str, as_json: bool,
            **context: str) -> None:
    """``--input``: the strict request document through the path the MCP write tools share."""
    from palimpsest.hn.submit import submit  # noqa: PLC0415 - the record path only

    if not as_json:
        raise InvalidInput("--input requires --json", code="invalid-request")
    _emit(submit(repo, operation, _read_input(input_path), **context), as_json)


def _emit(memory: VerifiedMemory, as_json: bool) -> None:
    from palimpsest.hn.show import command_result_human, command_result_json  # noqa: PLC0415

    if as_json:
        _out_json(command_result_json(memory))
    else:
        click.echo(command_result_human(memory), nl=False)


_EVIDENCE_FORMS = ("git:REV (a commit: any revision, or a 40- or 64-hex object ID)",
                   "event:sha256:HEX64 (an event's ID)",
                   "memory:ID (a memory's ID, or 8+ hex digits of it, as show takes)")
_EVIDENCE_HELP = "Evidence (repeatable): " + "; ".join(_EVIDENCE_FORMS) + "."


def _evidence(repo: pygit2.Repository, values: tuple[str, ...]) -> tuple[str, ...]:
    """Typed evidence IDs from what a person types: a revision for git:, a prefix for memory:
    (resolved as show resolves them), an event's full ID; anything else is refused with the
    forms that are accepted."""
    from palimpsest.hn import store  # noqa: PLC0415
    from palimpsest.hn.ids import EVIDENCE  # noqa: PLC0415
    from palimpsest.hn.show import find_memory  # noqa: PLC0415
    from palimpsest.text import safe_line  # noqa: PLC0415

    out: list[str] = []
    memories = None
    for value in values:
        kind, sep, rest = value.partition(":")
        if EVIDENCE.fullmatch(value):
            out.append(value)
        elif sep and rest and kind == "git":
            out.append("git:" + store.resolve_commit(repo, rest))
        elif sep and rest and kind == "memory":
            memories = memories if memories is not None else store.collect(repo)
            try:
                out.append("memory:" + find_memory(memories, rest).memory_id)
            except InvalidInput as exc:
                raise InvalidInput(f"--evidence: {exc.message}", code=exc.code,
                                   hint="give one of: " + "; ".join(_EVIDENCE_FORMS)) from exc
        else:
            raise InvalidInput(
                f"--evidence {safe_line(value)[:80]!r} is not evidence this tool takes",
                code="invalid-request", hint="give one of: " + "; ".join(_EVIDENCE_FORMS))
    return tuple(out)


def _record_options(func: F) -> F:
    options = [
        click.option("--at", "at", help="Anchor commit (any revision; resolved to a full ID)."),
        click.option(
            "--applies", type=click.Choice(["exact", "descendants", "subject"]), default=None
        ),
        click.option("--content", help="The record text (or give it as the one argument)."),
        click.option("--topic", "topics", multiple=True, help="Topic label (repeatable)."),
        click.option("--evidence", "evidence", multiple=True, help=_EVIDENCE_HELP),
        click.option("--path", "paths", multiple=True, help="Anchor a repository path."),
        click.option("--blob", "blobs", multiple=True, help="Blob ID or 'absent', per --path."),
        click.option("--subject", help="Typed subject ID (issue:, proposal:, event:, …)."),
        click.option("--outcome", default="", help="Attempt outcome token."),
        click.option("--stream", default="", help="Stream ID (default: your default stream)."),
        click.option("--actor", default=None, help="Must equal the active identity."),
        click.option("--completed", multiple=True, help="Handoff: completed item."),
        click.option("--assumption", "assumptions", multiple=True, help="Handoff: assumption."),
        click.option("--blocker", "blockers", multiple=True, help="Handoff: blocker."),
        click.option("--next-action", "next_actions", multiple=True, help="Handoff: proposal."),
        click.option("--json", "as_json", is_flag=True, help="Print the JSON result."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _flag_record(
    repo: pygit2.Repository, kind: str | None, text: str | None, o: dict[str, Any]
) -> Record:
    from palimpsest.hn import store  # noqa: PLC0415
    from palimpsest.hn.author import anchor_paths, build_record  # noqa: PLC0415
    from palimpsest.hn.envelope import Anchor, Handoff  # noqa: PLC0415

    if not kind:
        raise InvalidInput("--kind is required", code="invalid-request")
    if not o["at"] or not o["applies"]:
        raise InvalidInput("--at and --applies are required", code="invalid-request")
    if (o["content"] is None) == (text is None):
        raise InvalidInput(
            "give the content exactly once: --content TEXT or one argument", code="invalid-request"
        )
    commit = store.resolve_commit(repo, o["at"])
    paths = anchor_paths(repo, commit, list(o["paths"]), list(o["blobs"]))
    anchor = Anchor(commit, paths, o["subject"] or "")
    lists = (o["completed"], o["assumptions"], o["blockers"], o["next_actions"])
    handoff: Handoff | None = None
    if kind == "handoff" or any(lists):
        handoff = Handoff(*(tuple(x) for x in lists))
    content: str = o["content"] if o["content"] is not None else (text or "")
    return build_record(
        kind=kind,
        content=content,
        anchor=anchor,
        applies=o["applies"],
        topics=o["topics"],
        evidence=_evidence(repo, o["evidence"]),
        outcome=o["outcome"],
        handoff=handoff,
    )


_RECORD_FLAGS = (
    "content", "subject", "actor", "at", "applies",
)  # fmt: skip
_RECORD_MULTI = (
    "topics", "evidence", "paths", "blobs", "completed", "assumptions", "blockers", "next_actions",
)  # fmt: skip


def _refuse_flags_with_input(o: dict[str, Any], allowed: tuple[str, ...] = ()) -> None:
    used = [k for k in _RECORD_FLAGS if o.get(k) is not None and k not in allowed]
    used += [k for k in _RECORD_MULTI if o.get(k)]
    used += [k for k in ("outcome", "stream") if o.get(k)]
    if used:
        raise InvalidInput(
            f"--input cannot be combined with --{used[0].replace('_', '-')}",
            code="invalid-request",
        )


@click.group(name="memory")
@options.shared(
    "--repo",
    expose_value=True,
    default=".",
    type=click.Path(file_okay=False),
    help="Repository (default: the one containing the current directory).",
)
@click.pass_context
def command(ctx: click.Context, repo: str) -> None:
    """Record, correct and read signed repository memory (hn-memory/0)."""
    ctx.obj = {"repo": repo}


@command.command("record")
@click.argument("text", required=False)
@click.option(
    "--kind",
    type=click.Choice(
        ["observation", "decision", "assumption", "attempt", "verification", "handoff"]
    ),
    default=None,
)
@_record_options
@click.option("--input", "input_path", default=None, help="Strict JSON request file, or -.")
@click.pass_context
def record_cmd(
    ctx: click.Context,
    /,
    text: str | None,
    kind: str | None,
    input_path: str | None,
    as_json: bool,
    **o: Any,
) -> None:
    """Append a record to your memory stream."""
    repo, git_dir = _context(ctx)
    if input_path is not None:
        _refuse_flags_with_input(o)
        if kind is not None or text is not None:
            raise InvalidInput("--input cannot be combined with other record flags")
        _submit(repo, "record", input_path, as_json)
        return
    from palimpsest.hn.author import append  # noqa: PLC0415 - the record path only

    identity = _identity(git_dir, o["actor"])
    record = _flag_record(repo, kind, text, o)
    memory = append(repo, identity, operation="record", stream=o["stream"], record=record)
    _emit(memory, as_json)


@command.command("handoff")
@click.argument("text", required=False)
@_record_options
@click.option("--input", "input_path", default=None, help="Strict JSON request file, or -.")
@click.pass_context
def handoff_cmd(
    ctx: click.Context, /, text: str | None, input_path: str | None, as_json: bool, **o: Any
) -> None:
    """Append a handoff record (completed, assumptions, blockers, proposed next actions)."""
    repo, git_dir = _context(ctx)
    if input_path is None:
        from palimpsest.hn.author import append  # noqa: PLC0415 - the record path only

        identity = _identity(git_dir, o["actor"])
        record = _flag_record(repo, "handoff", text, o)
        memory = append(repo, identity, operation="record", stream=o["stream"], record=record)
        _emit(memory, as_json)
        return
    _refuse_flags_with_input(o, allowed=("at", "applies"))
    if text is not None:
        raise InvalidInput("--input cannot be combined with a content argument")
    _submit(repo, "handoff", input_path, as_json, at=o["at"] or "", applies=o["applies"] or "")


@command.command("supersede")
@click.argument("target")
@click.option(
    "--kind",
    type=click.Choice(
        ["observation", "decision", "assumption", "attempt", "verification", "handoff"]
    ),
    default=None,
)
@_record_options
@click.option("--input", "input_path", default=None, help="Strict JSON request file, or -.")
@click.pass_context
def supersede_cmd(
    ctx: click.Context, /, target: str, kind: str | None, input_path: str | None, as_json: bool,
    **o: Any
) -> None:
    """Replace one of your records with a new one (the old one stays readable)."""
    from palimpsest.hn import store  # noqa: PLC0415
    from palimpsest.hn.author import append, check_lifecycle_target  # noqa: PLC0415

    repo, git_dir = _context(ctx)
    if input_path is not None:
        _refuse_flags_with_input(o)
        if kind is not None:
            raise InvalidInput("--input cannot be combined with --kind", code="invalid-request")
        _submit(repo, "supersede", input_path, as_json, target=target)
        return
    identity = _identity(git_dir, o["actor"])
    from palimpsest.hn.show import find_memory  # noqa: PLC0415

    record = _flag_record(repo, kind, None, o)
    memories = store.collect(repo)
    target = find_memory(memories, target).memory_id  # a prefix, as show takes
    check_lifecycle_target(memories, target, identity.actor, "supersede")
    memory = append(
        repo, identity, operation="supersede", stream=o["stream"], record=record, target=target
    )
    _emit(memory, as_json)


def _lifecycle(  # noqa: PLR0917 - shared body of two commands
    ctx: click.Context,
    operation: str,
    target: str,
    reason: str | None,
    evidence: tuple[str, ...],
    stream: str,
    as_json: bool,
    input_path: str | None,
) -> None:
    from palimpsest.hn import store  # noqa: PLC0415
    from palimpsest.hn.author import append, check_lifecycle_target  # noqa: PLC0415
    from palimpsest.hn.show import find_memory  # noqa: PLC0415
    from palimpsest.text import to_lower, trim_space  # noqa: PLC0415

    repo, git_dir = _context(ctx)
    if input_path is not None:
        used = [name for name, given in (("reason", reason is not None),
                                         ("evidence", bool(evidence)), ("stream", bool(stream)))
                if given]
        if used:
            raise InvalidInput(f"--input cannot be combined with --{used[0]}",
                               code="invalid-request")
        _submit(repo, operation, input_path, as_json, target=target)
        return
    if reason is None:
        raise InvalidInput("--reason is required (or give a request with --input)",
                           code="invalid-request")
    identity = _identity(git_dir, None)
    memories = store.collect(repo)
    target = find_memory(memories, target).memory_id  # a prefix, as show takes
    check_lifecycle_target(memories, target, identity.actor, operation)
    evidence = _evidence(repo, evidence)
    memory = append(
        repo,
        identity,
        operation=operation,
        stream=stream,
        target=target,
        reason=to_lower(trim_space(reason)),
        evidence=evidence,
    )
    _emit(memory, as_json)


@command.command("retract")
@click.argument("target")
@click.option("--reason", default=None, help="Reason token, e.g. incorrect.")
@click.option("--stream", default="", help="Stream ID (default: your default stream).")
@click.option("--input", "input_path", default=None, help="Strict JSON request file, or -.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def retract_cmd(  # noqa: PLR0917 - click passes options by name
    ctx: click.Context, target: str, reason: str | None, stream: str, input_path: str | None,
    as_json: bool,
) -> None:
    """Retract one of your records (a new signed fact; nothing is erased)."""
    _lifecycle(ctx, "retract", target, reason, (), stream, as_json, input_path)


@command.command("challenge")
@click.argument("target")
@click.option("--reason", default=None, help="Reason token, e.g. evidence-mismatch.")
@click.option("--evidence", multiple=True, help=_EVIDENCE_HELP)
@click.option("--stream", default="", help="Stream ID (default: your default stream).")
@click.option("--input", "input_path", default=None, help="Strict JSON request file, or -.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def challenge_cmd(  # noqa: PLR0917 - click passes options by name
    ctx: click.Context,
    target: str,
    reason: str | None,
    evidence: tuple[str, ...],
    stream: str,
    input_path: str | None,
    as_json: bool,
) -> None:
    """Dispute another actor's record, optionally with evidence."""
    _lifecycle(ctx, "challenge", target, reason, evidence, stream, as_json, input_path)


@command.command("show")
@click.argument("memory")
@click.option("--at", default="HEAD", help="Query commit for the projection (default HEAD).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show_cmd(ctx: click.Context, memory: str, at: str, as_json: bool) -> None:
    """Show one memory with its lifecycle, applicability, evidence and trust."""
    from palimpsest.hn.reading import show_at  # noqa: PLC0415
    from palimpsest.hn.show import show_human, show_json  # noqa: PLC0415

    repo, _ = _context(ctx)
    found, result = show_at(repo, memory, at)
    if as_json:
        _out_json(show_json(found, result))
    else:
        click.echo(show_human(found, result), nl=False)


# recall, grep, index, prime and the policy editor live in modules of their own; registered here.
from palimpsest.cli.policy_cmd import COMMANDS as _POLICY_COMMANDS  # noqa: E402
from palimpsest.cli.prime_cmd import COMMANDS as _PRIME_COMMANDS  # noqa: E402
from palimpsest.cli.recall_cmd import COMMANDS as _READ_COMMANDS  # noqa: E402

for _extra_command in (*_READ_COMMANDS, *_PRIME_COMMANDS, *_POLICY_COMMANDS):
    command.add_command(_extra_command)
