"""The few Git files a warm recall reads, read directly: where the git dir is, what ``HEAD``
names, and the head of every memory ref.

Starting libgit2 (importing pygit2, which also loads the system's TLS certificates) costs more
than the whole of a warm recall, which needs Git only for this: the index already holds every
verified memory, and what a query commit reaches and the policy there are kept per commit.  So
the recall command reads these files itself and goes through libgit2 only when they say
something changed (or when they hold anything this reader does not read: a reftable, a
symbolic memory ref, a revision other than ``HEAD`` or a full commit ID, an unreadable file).
Every function returns None then, and the caller takes the libgit2 path, which gives the
answer or the error.  Nothing here writes.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from palimpsest.errors import InvalidInput
from palimpsest.hn.store.refs import LOCAL_PREFIX, REMOTES_PREFIX, parse_memory_ref

_OID = re.compile(r"[0-9a-f]{40}")
_MAX_DEPTH = 5  # symbolic HEAD chains followed


@dataclass(frozen=True, slots=True)
class GitDir:
    """A repository's git dir (a linked worktree's own) and its common dir (refs, objects)."""

    path: str
    common: str


def _read(path: str, limit: int = 4096) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        data = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _git_dir(path: str) -> GitDir | None:
    """``path`` as a git dir (it holds ``HEAD``, ``objects`` and ``refs``, itself or through
    ``commondir``) owned by us, or None (libgit2 then applies its own ownership rules)."""
    try:
        if os.stat(path).st_uid != os.geteuid() or not os.path.isfile(path + "/HEAD"):
            return None
    except OSError:
        return None
    common = path
    pointer = _read(path + "/commondir")
    if pointer is not None:
        common = os.path.normpath(os.path.join(path, pointer.strip()))
    if not os.path.isdir(common + "/objects") or not os.path.isdir(common + "/refs"):
        return None
    if os.path.lexists(common + "/reftable"):
        return None  # reftable refs are read by libgit2 only
    return GitDir(path, common)


def locate(where: str | Path) -> GitDir | None:
    """The git dir of the repository containing ``where`` (a work tree, a bare repository or a
    git dir), searching upwards as ``git`` does; None when this reader cannot tell (a
    symlinked ``.git`` among them: libgit2 decides those)."""
    directory = os.path.abspath(where)
    while True:
        dot = directory + ("/.git" if directory != "/" else ".git")
        try:
            mode = os.lstat(dot).st_mode
        except FileNotFoundError:
            mode = None
        except OSError:
            return None
        if mode is not None:
            if stat.S_ISDIR(mode):
                return _git_dir(dot)
            if not stat.S_ISREG(mode):
                return None
            text = _read(dot)
            if text is None or not text.startswith("gitdir: "):
                return None
            target = text[len("gitdir: ") :].strip()
            return _git_dir(os.path.normpath(os.path.join(directory, target)))
        if os.path.isfile(directory + "/HEAD") and os.path.isdir(directory + "/objects"):
            return _git_dir(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _packed(common: str) -> dict[str, str] | None:
    text = _read(common + "/packed-refs", limit=64 << 20)
    if text is None:
        return {} if not os.path.lexists(common + "/packed-refs") else None
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith(("#", "^")):
            continue
        oid, _, name = line.partition(" ")
        if not _OID.fullmatch(oid) or not name:
            return None
        out[name] = oid
    return out


def _loose(common: str, name: str) -> str | None:
    """A loose ref's target ID; None when absent.

    Raises:
        _Odd: a symbolic or malformed ref file.
    """
    text = _read(common + "/" + name)
    if text is None:
        return None
    oid = text.strip()
    if not _OID.fullmatch(oid):
        raise _Odd(name)
    return oid


class _Odd(Exception):
    """A ref file this reader does not read (symbolic, malformed): take the libgit2 path."""


def head(git: GitDir) -> str | None:
    """The commit ID ``HEAD`` names (not checked to be a commit), or None."""
    text = _read(git.path + "/HEAD")
    packed: dict[str, str] | None = None
    for _ in range(_MAX_DEPTH):
        if text is None:
            return None
        value = text.strip()
        if _OID.fullmatch(value):
            return value
        if not value.startswith("ref: refs/"):
            return None
        name = value[len("ref: ") :]
        try:
            for base in (git.path, git.common):  # per-worktree refs first
                loose = _loose(base, name)
                if loose is not None:
                    return loose
        except _Odd:
            return None
        if packed is None:
            packed = _packed(git.common)
            if packed is None:
                return None
        if name in packed:
            return packed[name]
        return None
    return None


def resolve(git: GitDir, rev: str) -> str | None:
    """``HEAD`` or a full lower-case commit ID as an ID; None for any other revision."""
    if rev == "HEAD":
        return head(git)
    return rev if _OID.fullmatch(rev) else None


def memory_refs(git: GitDir) -> list[tuple[str, str]] | None:
    """``(name, head)`` of every local and accepted memory ref, sorted by name; None when a
    ref in the memory namespaces is one this reader does not read or breaks the grammar (the
    libgit2 path then refuses it by name)."""
    packed = _packed(git.common)
    if packed is None:
        return None
    found = {n: o for n, o in packed.items() if n.startswith((LOCAL_PREFIX, REMOTES_PREFIX))}
    for prefix in (LOCAL_PREFIX, REMOTES_PREFIX):
        top = git.common + "/" + prefix.rstrip("/")
        for directory, dirs, files in os.walk(top):
            dirs.sort()
            for file in files:
                name = os.path.relpath(os.path.join(directory, file), git.common)
                try:
                    oid = _loose(git.common, name)
                except _Odd:
                    return None
                if oid is not None:
                    found[name] = oid
    out = []
    for name, oid in sorted(found.items()):
        try:
            parsed = parse_memory_ref(name, oid)
        except InvalidInput:
            return None
        if parsed is not None:
            out.append((name, oid))
    return out


__all__ = ["GitDir", "head", "locate", "memory_refs", "resolve"]
