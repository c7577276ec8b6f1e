"""The warm ``pal memory recall`` without click: the command agents run most, started light.

A coding agent runs ``pal memory recall`` before nearly every step, so its whole process is on
the agent's clock; importing click (and what it imports) costs about as much as the recall
itself.  :func:`run` recognises the plain forms of that one command —
``pal memory [--repo R] recall [--json] [filters…]``, each option as ``--name value`` or
``--name=value`` — and answers them when the index keeps the answer
(:func:`palimpsest.hn.recall.warm.recall_kept`).  Anything else (another command, ``--help``,
``--input``, a short option, a value that starts with ``-``, a number that is not plain digits,
a repository that is a file) and every answer that needs Git returns False, and ``pal`` runs the
click command, which gives the same bytes: both build the request with :func:`build_request`
and answer through the same functions; tests compare the two paths.

Imports only the standard library here; the recall modules are imported when a form matches.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    from typing import Any

# Option name -> (parameter of the click command, repeatable).
_VALUES: dict[str, tuple[str, bool]] = {
    "--repo": ("repo", False),
    "--at": ("at", False),
    "--subject": ("subject", False),
    "--path": ("path", False),
    "--topic": ("topics", True),
    "--kind": ("kinds", True),
    "--actor": ("actors", True),
    "--lifecycle": ("lifecycles", True),
    "--trust": ("trusts", True),
    "--max-records": ("max_records", False),
    "--max-content-bytes": ("max_content_bytes", False),
    "--cursor": ("cursor", False),
    "--query": ("query", False),
}
_FLAGS = {"--json": "as_json", "--include-untrusted": "include_untrusted"}
_INTS = ("max_records", "max_content_bytes")
_BEFORE = ("--repo", "--json")  # what the memory group (and pal itself) takes before `recall`


def parse(argv: list[str]) -> dict[str, Any] | None:
    """The click command's parameters for a plain recall form, or None for anything else."""
    if len(argv) < 2 or argv[0] != "memory" or "recall" not in argv:
        return None
    o: dict[str, Any] = {
        "repo": ".", "at": "HEAD", "subject": "", "path": "", "topics": [], "kinds": [],
        "actors": [], "lifecycles": [], "trusts": [], "max_records": None,
        "max_content_bytes": None, "cursor": "", "query": "", "as_json": False,
        "include_untrusted": False,
    }  # fmt: skip
    seen_command = False
    i = 1
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "recall" and not seen_command:
            seen_command = True
            continue
        name, eq, inline = arg.partition("=")
        if name in _FLAGS and not eq:
            if not seen_command and name not in _BEFORE:
                return None
            o[_FLAGS[name]] = True
            continue
        if name not in _VALUES or (not seen_command and name not in _BEFORE):
            return None  # positional, unknown, short or help option: click decides
        if eq:
            value = inline
        elif i < len(argv):
            value = argv[i]
            i += 1
        else:
            return None
        if not value or value.startswith("-"):
            return None  # click's reading of these is its own
        key, repeatable = _VALUES[name]
        if key in _INTS:
            if not (value.isascii() and value.isdigit()):
                return None
            o[key] = int(value)
        elif repeatable:
            o[key].append(value)
        else:
            o[key] = value
    if not seen_command or os.path.isfile(o["repo"]):
        return None
    return o


def build_request(at_commit: str, o: dict[str, Any], query: str = "") -> Any:
    """The normalised request of the click command's parameters ``o`` (both paths use this)."""
    from palimpsest.hn.recall.request import (  # noqa: PLC0415
        DEFAULT_MAX_CONTENT_BYTES,
        DEFAULT_MAX_RECORDS,
        normalize_request,
    )

    return normalize_request(
        at_commit=at_commit,
        subject=o["subject"],
        path=o["path"],
        topic=list(o["topics"]),
        kind=list(o["kinds"]),
        actor=list(o["actors"]),
        lifecycle=list(o["lifecycles"]),
        trust=list(o["trusts"]),
        query=query,
        max_records=DEFAULT_MAX_RECORDS if o["max_records"] is None else o["max_records"],
        max_content_bytes=(
            DEFAULT_MAX_CONTENT_BYTES if o["max_content_bytes"] is None else o["max_content_bytes"]
        ),
        cursor=o["cursor"],
        include_untrusted=o["include_untrusted"],
    )


def emit(result: Any, as_json: bool) -> None:
    """Write a recall result as the click command does: exact JSON bytes, or human text."""
    if as_json:
        sys.stdout.buffer.write(result.to_json())
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(result.to_human())
        sys.stdout.flush()


def run(argv: list[str]) -> bool:
    """Answer a plain warm recall without click; False when ``pal`` must run the command.

    Raises:
        PalError: the refusals the click command gives for the same request.
    """
    o = parse(argv)
    if o is None:
        return False
    from palimpsest.hn.recall.warm import recall_kept  # noqa: PLC0415
    from palimpsest.hn.store import headfiles  # noqa: PLC0415

    git = headfiles.locate(o["repo"])
    if git is None:
        return False
    at = headfiles.resolve(git, o["at"])
    if at is None:
        return False
    request = build_request(at, o, o["query"])
    result = recall_kept(git, request, explain=not o["as_json"])
    if result is None:
        return False
    emit(result, o["as_json"])
    return True


__all__ = ["build_request", "emit", "parse", "run"]
