"""``pal records`` and ``pal recall``: what a running server's memories hold, and asking them.

Clients of ``pal serve`` over :class:`palimpsest.client.Client` (connection, output and errors:
:mod:`.connect`). Everything recalled or read is data written by someone, never instructions:
human output says so and shows who wrote it; ``--json`` prints the server's answer.
"""

from __future__ import annotations

import mimetypes
import sys
from pathlib import Path
from typing import Any

import click

from palimpsest.cli import connect
from palimpsest.errors import InvalidInput
from palimpsest.text import safe_line

_DATA = "recalled data, not instructions:"


def _text(record: Any) -> str:
    parts = []
    for part in record.get("content", []):
        if part.get("type") == "text":
            parts.append(part.get("text", ""))
        elif part.get("type") == "file":
            f = part.get("file", {})
            parts.append(f"[file {f.get('name', '?')} ({f.get('media_type', '?')}, "
                         f"{f.get('bytes', '?')} bytes)] {part.get('text') or ''}".rstrip())
    return " / ".join(parts)


def _line(record: Any) -> str:
    writer = record.get("written_by", {})
    title = f"{record['title']}: " if record.get("title") else ""
    return (f"{record['id']}  {record['type']} v{record['version']} {record['status']}  "
            f"by {writer.get('kind')}:{writer.get('id')}  {safe_line(title + _text(record))}")


def _content(text: str | None) -> str | None:
    if text == "-":
        return sys.stdin.read()
    return text


@click.group("records", cls=connect.ClientGroup)
@connect.connection
def records() -> None:
    """Records of a running server: remember, list, show, revise, forget, erase."""


@records.command("remember")
@click.argument("memory_id")
@click.argument("content", required=False)
@click.option("--type", "type_", default=None, help="fact, note, procedure, entity, … "
              "(default: the server's).")
@click.option("--title", default=None)
@click.option("--attr", "attrs", multiple=True, metavar="KEY=VALUE",
              help="An attribute (repeatable); true, false, null and numbers are JSON.")
@click.option("--standing", is_flag=True, help="A standing record (what `prime` gives).")
@click.option("--file", "file_path", type=click.Path(path_type=Path, dir_okay=False,
                                                     exists=True), default=None,
              help="Upload this file and keep it as a file part of the record.")
@click.option("--media-type", default=None, help="The file's media type (default: guessed).")
@click.option("--idempotency-key", default=None, help="Repeat safely with the same key.")
@click.pass_context
def remember(ctx: click.Context, *, memory_id: str, content: str | None, type_: str | None,
             title: str | None, attrs: tuple[str, ...], standing: bool,
             file_path: Path | None, media_type: str | None,
             idempotency_key: str | None) -> None:
    """Remember CONTENT (or - for standard input) in MEMORY_ID."""
    text = _content(content)
    attributes = connect.parse_attributes(attrs) or {}
    if standing:
        attributes["standing"] = True
    client = connect.client(ctx)
    parts: Any = text
    if file_path is not None:
        kind = media_type or mimetypes.guess_type(file_path.name)[0] or "application/octet-stream"
        uploaded = client.files.upload(file_path.read_bytes(), media_type=kind,
                                       name=file_path.name)
        parts = ([{"type": "text", "text": text}] if text else []) + [
            {"type": "file", "file": {"id": uploaded["id"]}}]
    if parts is None and title is None:
        raise InvalidInput("nothing to remember", code="invalid-request",
                           hint="give CONTENT (or - for standard input), --file or --title")
    made = client.records.remember(memory_id, parts if parts is not None else "", type=type_,
                                   title=title, attributes=attributes or None,
                                   idempotency_key=idempotency_key)

    def human() -> list[str]:
        if made["object"] == "memory.pending_review":
            return [f"pending review: proposal {made['proposal_id']} on {made.get('ref_name')}"]
        return [f"remembered {made['id']} in {made['memory_id']}"]

    connect.emit(ctx, made, human)


@records.command("list")
@click.argument("memory_id")
@click.option("--type", "type_", default=None, help="Only records of this type.")
@click.option("--all", "include_all", is_flag=True, help="Superseded and forgotten ones too.")
@click.option("--as-of", default=None, help="As the memory was at this instant (RFC 3339).")
@click.option("--limit", type=click.IntRange(1, 200), default=None)
@click.option("--cursor", default=None, help="Continue a listing (its `next`).")
@click.pass_context
def list_cmd(ctx: click.Context, *, memory_id: str, type_: str | None, include_all: bool,
             as_of: str | None, limit: int | None, cursor: str | None) -> None:
    """Records of one memory, newest first."""
    page = connect.client(ctx).records.list(memory_id, type=type_,
                                            include="all" if include_all else None,
                                            as_of=as_of, limit=limit, cursor=cursor)

    def human() -> list[str]:
        lines = [f"{memory_id} — {_DATA}"] + [_line(r) for r in page["data"]]
        if not page["data"]:
            lines.append("(no records)")
        if page.get("next"):
            lines.append(f"more: --cursor {page['next']}")
        return lines

    connect.emit(ctx, page, human)


@records.command("show")
@click.argument("memory_id")
@click.argument("record_id")
@click.option("--as-of", default=None, help="The version current at this instant.")
@click.option("--history", is_flag=True, help="Every version, oldest first.")
@click.pass_context
def show(ctx: click.Context, *, memory_id: str, record_id: str, as_of: str | None,
         history: bool) -> None:
    """One record (or its whole history)."""
    client = connect.client(ctx)
    if history:
        versions = client.records.history(memory_id, record_id)
        connect.emit(ctx, versions, lambda: [_DATA] + [_line(r) for r in versions["data"]])
        return
    record = client.records.get(memory_id, record_id, as_of=as_of)
    connect.emit(ctx, record, lambda: [_DATA, _line(record)])


@records.command("revise")
@click.argument("memory_id")
@click.argument("record_id")
@click.argument("content", required=False)
@click.option("--title", default=None)
@click.option("--attr", "attrs", multiple=True, metavar="KEY=VALUE",
              help="Replace the attributes with these (repeatable).")
@click.option("--idempotency-key", default=None)
@click.pass_context
def revise(ctx: click.Context, *, memory_id: str, record_id: str, content: str | None,
           title: str | None, attrs: tuple[str, ...], idempotency_key: str | None) -> None:
    """Write a new version of a record (the old one stays in its history)."""
    made = connect.client(ctx).records.revise(
        memory_id, record_id, content=_content(content), title=title,
        attributes=connect.parse_attributes(attrs), idempotency_key=idempotency_key)
    connect.emit(ctx, made, lambda: [f"revised {made['id']} (now version {made['version']})"])


@records.command("forget")
@click.argument("memory_id")
@click.argument("record_id")
@click.option("--idempotency-key", default=None)
@click.pass_context
def forget(ctx: click.Context, *, memory_id: str, record_id: str,
           idempotency_key: str | None) -> None:
    """Forget a record; its trace and history are kept."""
    made = connect.client(ctx).records.forget(memory_id, record_id,
                                              idempotency_key=idempotency_key)
    connect.emit(ctx, made, lambda: [f"forgot {made['id']}"])


@records.command("erase")
@click.argument("memory_id")
@click.argument("record_ids", nargs=-1, required=True)
@click.option("--yes", is_flag=True, help="Confirm: the content is removed for good.")
@click.option("--idempotency-key", default=None)
@click.pass_context
def erase(ctx: click.Context, *, memory_id: str, record_ids: tuple[str, ...], yes: bool,
          idempotency_key: str | None) -> None:
    """Remove records' content for good (needs delete); says what it could not reach."""
    if not yes:
        raise InvalidInput("erase removes the records' content for good", code="confirm",
                           hint="add --yes (forget keeps the content: `pal records forget`)")
    done = connect.client(ctx).records.erase(memory_id, record_ids,
                                             idempotency_key=idempotency_key)
    connect.emit(ctx, done, lambda: [f"erased: {', '.join(done['erased']) or '-'}",
                                     f"unreachable: {', '.join(done['unreachable']) or '-'}"])


@records.command("content")
@click.argument("memory_id")
@click.argument("record_id")
@click.argument("index", type=click.IntRange(0))
@click.option("--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the bytes to this new file instead of standard output.")
@click.pass_context
def content(ctx: click.Context, *, memory_id: str, record_id: str, index: int,
            output: Path | None) -> None:
    """The bytes of a record's file part INDEX."""
    data = connect.client(ctx).records.content(memory_id, record_id, index)
    if output is not None:
        if output.exists():
            raise InvalidInput(f"{output} already exists; choose a new file", code="exists")
        output.write_bytes(data)
        connect.emit(ctx, {"path": str(output), "bytes": len(data)},
                     lambda: [f"wrote {len(data)} bytes to {output}"])
        return
    if sys.stdout.isatty():
        raise InvalidInput("refusing to write file bytes to a terminal", code="tty",
                           hint="pass --output FILE or redirect standard output")
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@click.command("recall", cls=connect.ClientCommand)
@connect.connection
@click.argument("memory_id")
@click.argument("text", required=False)
@click.option("--query", default=None, help="Lexical terms (the text is the question).")
@click.option("--type", "types", multiple=True, help="Only records of this type (repeatable).")
@click.option("--depth", type=click.IntRange(0), default=None,
              help="How many levels below MEMORY_ID to search (default: all).")
@click.option("--limit", type=click.IntRange(1, 100), default=None)
@click.option("--as-of", default=None, help="As the memories were at this instant.")
@click.option("--include-pending", is_flag=True, default=None,
              help="Also your own writes still waiting for review.")
@click.pass_context
def recall(ctx: click.Context, *, memory_id: str, text: str | None, query: str | None,
           types: tuple[str, ...], depth: int | None, limit: int | None, as_of: str | None,
           include_pending: bool | None) -> None:
    """Ask MEMORY_ID and every memory below it you may read; each hit names its memory."""
    if text is None and query is None:
        raise InvalidInput("nothing to ask", code="invalid-request",
                           hint="give the question as TEXT, or --query TERMS")
    found = connect.client(ctx).recall(memory_id, text, query=query, types=types or None,
                                       depth=depth, limit=limit, as_of=as_of,
                                       include_pending=include_pending)

    def human() -> list[str]:
        lines = [_DATA]
        for hit in found["results"]:
            lines.append(f"[{hit['memory']['name']} {hit['memory']['id']}] "
                         f"{_line(hit['record'])}")
        if not found["results"]:
            lines.append("(nothing found)" + (" — the server abstains" if found["abstain"]
                                              else ""))
        if found["degraded"]:
            lines.append(f"not done: {', '.join(found['degraded'])}")
        return lines

    connect.emit(ctx, found, human)


__all__ = ["recall", "records"]
