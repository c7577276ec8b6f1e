"""Replication selections: which remote refs a sync may transport, and within which budgets.

A selection authorises *transport*, never trust (hn-memory-v0.md §20.1): the streams it names are
fetched into quarantine and checked like any other remote data.  This module is the pure part —
names, grammar, the file format — plus the small file I/O that persists a selection below
``<git-dir>/hn/replication/selections/``.  It never touches Git.

File format (upstream ``replication.go``): Go ``MarshalIndent`` with two spaces and a final LF;
keys ``version`` (1), ``remote``, ``actors`` and ``proposals`` (``null`` when not given),
``memories`` (omitted when empty; sorted unique full stream IDs), ``all`` and ``budgets``.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palimpsest import canonical
from palimpsest.errors import InvalidInput

SELECTION_VERSION = 1
DEFAULT_REMOTE = "origin"

DEFAULT_MAX_EVENTS = 10_000
DEFAULT_MAX_OBJECTS = 100_000
DEFAULT_MAX_OBJECT_BYTES = 64 << 20
DEFAULT_MAX_ATTACHMENT_BYTES = 16 << 20
DEFAULT_MAX_TOTAL_BYTES = 1 << 30
# A selection file is tiny; anything larger is not ours.
_MAX_SELECTION_FILE_BYTES = 16 << 20

_REMOTE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_HEX64_RE = re.compile(r"[0-9a-f]{64}")
_STREAM_RE = re.compile(r"sha256:[0-9a-f]{64}")
_MAX_REMOTE_BYTES = 128
_MAX_BUDGET = 2**63 - 1  # budgets are Go ints: a larger number makes the file unreadable upstream


def validate_remote(name: str) -> str:
    """Return ``name`` if it is a valid remote name for replication refs and file names.

    Grammar (§8): ``[A-Za-z0-9_][A-Za-z0-9_.-]*``, at most 128 bytes, no ``..``, no trailing
    ``.``, no ``.lock`` suffix.

    Raises:
        InvalidInput: code ``invalid-remote``.
    """
    if (
        not _REMOTE_RE.fullmatch(name)
        or len(name.encode("utf-8")) > _MAX_REMOTE_BYTES
        or ".." in name
        or name.endswith(".")
        or name.endswith(".lock")
    ):
        raise InvalidInput(
            "invalid remote name",
            code="invalid-remote",
            hint="use letters, digits, '_', '.' and '-' (at most 128 bytes, no '..' or '.lock')",
        )
    return name


def validate_stream_id(value: str) -> str:
    """Return ``value`` if it is a full stream ID ``sha256:<64 lower-case hex>``.

    Raises:
        InvalidInput: code ``invalid-selector``.
    """
    if not _STREAM_RE.fullmatch(value):
        raise InvalidInput(
            "invalid memory stream selector: want sha256:<64 lower-case hex>",
            code="invalid-selector",
        )
    return value


def validate_actor_id(value: str) -> str:
    """Return ``value`` if it is an actor ID (64 lower-case hex).

    Raises:
        InvalidInput: code ``invalid-selector``.
    """
    if not _HEX64_RE.fullmatch(value):
        raise InvalidInput(
            "invalid actor selector: want 64 lower-case hex", code="invalid-selector"
        )
    return value


def is_hex64(value: str) -> bool:
    """True when ``value`` is exactly 64 lower-case hex digits."""
    return _HEX64_RE.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class Budgets:
    """Per-selection limits checked after fetch and before validation (§20.2)."""

    max_events: int = DEFAULT_MAX_EVENTS
    max_objects: int = DEFAULT_MAX_OBJECTS
    max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES
    max_attachment_bytes: int = DEFAULT_MAX_ATTACHMENT_BYTES
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES

    def __post_init__(self) -> None:
        for name in _BUDGET_KEYS.values():
            value = getattr(self, name)
            integer = isinstance(value, int) and not isinstance(value, bool)
            if not integer or not 0 < value <= _MAX_BUDGET:
                raise InvalidInput(
                    f"budget {name.replace('_', '-')} must be a positive integer up to "
                    f"{_MAX_BUDGET}",
                    code="invalid-budget",
                )

    def to_json(self) -> dict[str, int]:
        """The ``budgets`` object in wire order."""
        return {key: getattr(self, name) for key, name in _BUDGET_KEYS.items()}


_BUDGET_KEYS = {
    "maxEvents": "max_events",
    "maxObjects": "max_objects",
    "maxObjectBytes": "max_object_bytes",
    "maxAttachmentBytes": "max_attachment_bytes",
    "maxTotalBytes": "max_total_bytes",
}


@dataclass(frozen=True, slots=True)
class Selection:
    """A validated replication selection for one remote.

    ``actors`` and ``proposals`` are ``None`` when not given (written as JSON ``null``).
    ``memories`` is a sorted tuple of unique stream IDs.  ``implicit`` marks the default used
    when no file is saved (an implicit ``all``); it is never written.
    """

    remote: str
    actors: tuple[str, ...] | None = None
    proposals: tuple[str, ...] | None = None
    memories: tuple[str, ...] = ()
    all: bool = False
    budgets: Budgets = field(default_factory=Budgets)
    implicit: bool = False

    def __post_init__(self) -> None:
        validate_remote(self.remote)
        exact = bool(self.actors) or bool(self.proposals) or bool(self.memories)
        if self.all and exact:
            raise InvalidInput(
                "--all cannot be combined with exact selectors", code="invalid-selection"
            )
        if not self.all and not exact:
            raise InvalidInput(
                "a selection needs at least one selector or --all",
                code="invalid-selection",
                hint="pass --memory STREAM, --actor ACTOR or --all",
            )
        for value in self.actors or ():
            validate_actor_id(value)
        for value in self.proposals or ():
            if not _STREAM_RE.fullmatch(value):
                raise InvalidInput("invalid proposal selector", code="invalid-selector")
        for value in self.memories:
            validate_stream_id(value)
        for name, values in (
            ("actor", self.actors),
            ("proposal", self.proposals),
            ("memory", self.memories),
        ):
            if values is not None and len(set(values)) != len(values):
                raise InvalidInput(f"duplicate {name} selector", code="invalid-selector")
        if list(self.memories) != sorted(self.memories):
            raise InvalidInput("memory selectors must be sorted", code="invalid-selector")

    def to_json(self) -> dict[str, Any]:
        """The selection document in upstream wire order."""
        doc: dict[str, Any] = {
            "version": SELECTION_VERSION,
            "remote": self.remote,
            "actors": list(self.actors) if self.actors is not None else None,
            "proposals": list(self.proposals) if self.proposals is not None else None,
        }
        if self.memories:
            doc["memories"] = list(self.memories)
        doc["all"] = self.all
        doc["budgets"] = self.budgets.to_json()
        return doc

    def encode(self) -> bytes:
        """The exact file bytes: two-space indented JSON and a final LF."""
        return canonical.encode_indent(self.to_json())


def build_selection(
    remote: str,
    *,
    memories: list[str] | tuple[str, ...] = (),
    actors: list[str] | tuple[str, ...] = (),
    all_streams: bool = False,
    budgets: Budgets | None = None,
) -> Selection:
    """Build a selection from command-line values.

    Memory selectors are validated, refused when duplicated, then sorted; actor selectors keep
    their order.  Unset selector lists are written as ``null``.

    Raises:
        InvalidInput: bad remote, selector, budget or combination.
    """
    for value in memories:
        validate_stream_id(value)
    if len(set(memories)) != len(memories):
        raise InvalidInput("duplicate memory selector", code="invalid-selector")
    return Selection(
        remote=remote,
        actors=tuple(actors) if actors else None,
        proposals=None,
        memories=tuple(sorted(memories)),
        all=all_streams,
        budgets=budgets or Budgets(),
    )


def _str_list(doc: dict[str, Any], key: str) -> tuple[str, ...] | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidInput(f"selection field {key} must be a list of strings", code="bad-selection")
    return tuple(value)


def decode_selection(data: bytes, *, remote: str) -> Selection:
    """Parse a saved selection file strictly.

    A legacy file without ``memories`` still loads.  The ``remote`` inside must equal the remote
    the file was found for.

    Raises:
        InvalidInput: code ``bad-selection`` (or a selector code) for any malformed file.
    """
    doc = canonical.decode(data, max_bytes=_MAX_SELECTION_FILE_BYTES, trailing_whitespace=True)
    if not isinstance(doc, dict):
        raise InvalidInput("selection file must hold a JSON object", code="bad-selection")
    allowed = {"version", "remote", "actors", "proposals", "memories", "all", "budgets"}
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise InvalidInput(f"unknown selection field {unknown[0][:64]!r}", code="bad-selection")
    if doc.get("version") != SELECTION_VERSION or isinstance(doc.get("version"), bool):
        raise InvalidInput("unsupported selection version", code="bad-selection")
    if doc.get("remote") != remote:
        raise InvalidInput("selection file names another remote", code="bad-selection")
    all_value = doc.get("all", False)
    if not isinstance(all_value, bool):
        raise InvalidInput("selection field all must be a boolean", code="bad-selection")
    budgets_doc = doc.get("budgets")
    if not isinstance(budgets_doc, dict):
        raise InvalidInput("selection field budgets must be an object", code="bad-selection")
    unknown = sorted(set(budgets_doc) - set(_BUDGET_KEYS))
    if unknown:
        raise InvalidInput(f"unknown budget field {unknown[0][:64]!r}", code="bad-selection")
    defaults = Budgets()
    budgets = Budgets(
        **{
            name: budgets_doc.get(key, getattr(defaults, name))
            for key, name in _BUDGET_KEYS.items()
        }
    )
    return Selection(
        remote=remote,
        actors=_str_list(doc, "actors"),
        proposals=_str_list(doc, "proposals"),
        memories=_str_list(doc, "memories") or (),
        all=all_value,
        budgets=budgets,
    )


def selection_file_name(remote: str) -> str:
    """``base64url-nopad(remote) + ".json"`` (upstream file naming)."""
    encoded = base64.urlsafe_b64encode(validate_remote(remote).encode("utf-8"))
    return encoded.decode("ascii").rstrip("=") + ".json"


def selections_dir(git_dir: Path) -> Path:
    """``<git-dir>/hn/replication/selections``."""
    return git_dir / "hn" / "replication" / "selections"


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` and its missing parents with mode 0700; refuse a symlinked component."""
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for item in reversed(missing):
        item.mkdir(mode=0o700)
        os.chmod(item, 0o700)
    if path.is_symlink() or not path.is_dir():
        raise InvalidInput(f"{path} is not a plain directory", code="unsafe-path")


def save_selection(git_dir: Path, selection: Selection) -> Path:
    """Write the selection atomically (temporary file + rename) with mode 0600.

    Raises:
        InvalidInput: the selections directory is not a plain directory.
    """
    directory = selections_dir(git_dir)
    ensure_private_dir(directory)
    target = directory / selection_file_name(selection.remote)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    data = selection.encode()
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    finally:
        if temporary.exists():
            temporary.unlink()
    return target


def load_selection(git_dir: Path, remote: str) -> Selection:
    """Load the saved selection for ``remote``, or the implicit ``all`` with default budgets.

    Raises:
        InvalidInput: the saved file is malformed or is a symlink.
    """
    path = selections_dir(git_dir) / selection_file_name(remote)
    if path.is_symlink():
        raise InvalidInput("selection file is a symlink", code="unsafe-path")
    if not path.exists():
        return Selection(remote=remote, all=True, implicit=True)
    return decode_selection(path.read_bytes(), remote=remote)


def saved_selection_bytes(git_dir: Path, remote: str) -> bytes | None:
    """The exact saved bytes for ``remote`` (``None`` when nothing is saved)."""
    path = selections_dir(git_dir) / selection_file_name(remote)
    if path.is_symlink() or not path.is_file():
        return None
    return path.read_bytes()


__all__ = [
    "DEFAULT_REMOTE",
    "Budgets",
    "Selection",
    "build_selection",
    "decode_selection",
    "ensure_private_dir",
    "is_hex64",
    "load_selection",
    "save_selection",
    "saved_selection_bytes",
    "selection_file_name",
    "selections_dir",
    "validate_actor_id",
    "validate_remote",
    "validate_stream_id",
]
