"""``pal mcp install|uninstall``: one ``pal mcp`` server entry in a client's project config.

Claude Code reads project-scoped servers from ``.mcp.json`` at the repository root, Cursor from
``.cursor/mcp.json``; both hold ``{"mcpServers": {NAME: {"command", "args"}}}`` next to whatever
else the file carries. Installing puts one entry under ``NAME`` and touches nothing else: other
servers, other keys and their order stay as they were. Installing the same thing again changes
nothing; installing with other flags replaces only the entry pal wrote. An entry of that name
that pal did not write is refused, never overwritten.

A journal below ``.git/hn/mcp-clients/`` (private, never committed) keeps what the entry was
before (or that there was none, or no file) and what was written, so ``uninstall`` restores it
— but only if the entry is still what pal wrote; one changed since is reported and left alone.

The planning functions are pure (documents in, documents out); :func:`read_config` and
:func:`write_config` are the thin file shell.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palimpsest.errors import Conflict, InvalidInput

CLIENTS = {"claude-code": Path(".mcp.json"), "cursor": Path(".cursor") / "mcp.json"}
DEFAULT_NAME = "palimpsest-repo"
MAX_CONFIG_BYTES = 1 << 20
JOURNAL_VERSION = 0


@dataclass(frozen=True, slots=True)
class Plan:
    """What an install or uninstall does: the new document (``None``: delete the file), the
    new journal (``None``: delete it) and the action in one word."""

    document: dict[str, Any] | None
    journal: dict[str, Any] | None
    action: str  # created | updated | unchanged | restored | removed | kept | absent
    text: bytes | None = None  # exact bytes to write instead of rendering ``document``


def config_path(root: Path, client: str) -> Path:
    """The client's project config file for the repository work tree ``root``.

    Raises:
        InvalidInput: ``unknown-client``.
    """
    if client not in CLIENTS:
        raise InvalidInput(f"unknown client {client[:32]!r}; use " + " or ".join(CLIENTS),
                           code="unknown-client")
    return root / CLIENTS[client]


def server_entry(command: str, args: list[str]) -> dict[str, Any]:
    """The ``mcpServers`` entry that starts ``pal mcp`` (both clients read this shape)."""
    return {"command": command, "args": list(args)}


def _servers(document: dict[str, Any], path: Path) -> dict[str, Any]:
    servers = document.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise InvalidInput(f"{path}: mcpServers is not an object; fix the file first",
                           code="invalid-client-config")
    return servers


def plan_install(document: dict[str, Any] | None, journal: dict[str, Any] | None, *,
                 path: Path, name: str, entry: dict[str, Any], original: str = "") -> Plan:
    """Put ``entry`` under ``mcpServers[name]`` of ``document`` (``None``: no file yet);
    ``original`` is the file's text, kept so that uninstall can give back the same bytes.

    Raises:
        Conflict: ``entry-exists``: an entry of that name pal did not write.
    """
    current = dict(document) if document is not None else {}
    servers = dict(_servers(current, path))
    existing = servers.get(name)
    ours = journal is not None and journal.get("name") == name and existing == journal.get(
        "written")
    if existing == entry and (ours or journal is None):
        if journal is None:  # someone wrote exactly this by hand: adopt nothing, change nothing
            return Plan(document, None, "unchanged")
        return Plan(document, journal, "unchanged")
    if existing is not None and not ours:
        raise Conflict(f"{path} already has a server named {name!r} that pal mcp install did "
                       "not write", code="entry-exists",
                       hint="pass --name OTHER, or remove that entry first")
    servers[name] = entry
    current["mcpServers"] = servers
    if ours and journal is not None:
        return Plan(current, {**journal, "written": entry}, "updated")
    record = {"version": JOURNAL_VERSION, "path": str(path), "name": name,
              "createdFile": document is None, "hadServers": "mcpServers" in (document or {}),
              "original": original, "written": entry}
    return Plan(current, record, "created")


def plan_uninstall(document: dict[str, Any] | None, journal: dict[str, Any] | None, *,
                   path: Path) -> Plan:
    """Undo an install: restore what the entry was before, if it is still what pal wrote."""
    if journal is None:
        return Plan(document, None, "absent")
    name = journal.get("name")
    current = dict(document) if document is not None else {}
    servers = dict(_servers(current, path))
    if not isinstance(name, str) or servers.get(name) != journal.get("written"):
        # changed or removed since: the person's edit wins; the journal is spent either way
        return Plan(document, None, "kept" if name in servers else "absent")
    del servers[name]
    if servers or journal.get("hadServers"):
        current["mcpServers"] = servers
    else:
        current.pop("mcpServers", None)
    if journal.get("createdFile") and not current:
        return Plan(None, None, "removed")
    original = journal.get("original")
    text = None
    if isinstance(original, str) and original:
        try:
            same = json.loads(original) == current
        except ValueError:
            same = False
        text = original.encode("utf-8") if same else None  # nothing else changed: same bytes
    return Plan(current, None, "restored", text)


def render_config(document: dict[str, Any]) -> bytes:
    """The file as written: two-space indented JSON, keys in their order, one LF."""
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def read_config(path: Path) -> dict[str, Any] | None:
    """The client's config as an object, or ``None`` when there is no file.

    Raises:
        InvalidInput: ``invalid-client-config``: not a JSON object, unreadable, or too large
            (it is never overwritten then).
    """
    if path.is_symlink():
        raise InvalidInput(f"{path} is a symlink; refusing to edit it", code="unsafe-path")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}",
                           code="invalid-client-config") from exc
    try:
        value = json.loads(data.decode("utf-8")) if len(data) <= MAX_CONFIG_BYTES else None
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput(f"{path} is not valid JSON; fix or move it first",
                           code="invalid-client-config") from exc
    if not isinstance(value, dict):
        raise InvalidInput(f"{path} must hold a JSON object of at most {MAX_CONFIG_BYTES} bytes",
                           code="invalid-client-config")
    return value


def write_config(path: Path, document: dict[str, Any] | None, text: bytes | None = None) -> None:
    """Replace the file atomically (keeping its mode) with ``text`` or the rendered document,
    or delete it for ``None``."""
    if document is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(render_config(document) if text is None else text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


__all__ = ["CLIENTS", "DEFAULT_NAME", "Plan", "config_path", "plan_install", "plan_uninstall",
           "read_config", "render_config", "server_entry", "write_config"]
