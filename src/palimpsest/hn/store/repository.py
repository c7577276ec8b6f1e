"""Opening a repository and listing its memory refs through libgit2 (pygit2).  Reads only;
never changes a ref."""

from __future__ import annotations

from pathlib import Path

import pygit2

from palimpsest.errors import NotFound, Unavailable
from palimpsest.hn.store.refs import MemoryRef, malformed_ref, parse_memory_ref


def open_repository(where: str | Path | pygit2.Repository) -> pygit2.Repository:
    """Open (discovering upwards from a path) a Git repository.

    Raises:
        NotFound: ``not-a-repository``.
    """
    if isinstance(where, pygit2.Repository):
        return where
    found = pygit2.discover_repository(str(where))
    if found is None:
        raise NotFound(
            f"{where} is not inside a Git repository",
            code="not-a-repository",
            hint="run the command inside a Git repository (git init)",
        )
    try:
        return pygit2.Repository(found)
    except pygit2.GitError as exc:
        raise Unavailable(f"cannot open repository: {exc}", code="git-error") from exc


def git_dir(repo: pygit2.Repository) -> Path:
    """The repository's private directory (``.git`` or the bare repository itself)."""
    return Path(repo.path).resolve()


def list_memory_refs(repo: pygit2.Repository) -> list[MemoryRef]:
    """Every local and accepted memory ref, sorted by name (§8, §11).

    Raises:
        InvalidInput: a malformed or symbolic ref inside the memory namespaces.
    """
    out: list[MemoryRef] = []
    for name in repo.references:
        if not name.startswith(("refs/hn/memory/", "refs/hn/remotes/")):
            continue
        parsed = parse_memory_ref(name)
        if parsed is None:
            continue
        ref = repo.references[name]
        if ref.type != pygit2.enums.ReferenceType.DIRECT:
            raise malformed_ref(name)
        out.append(
            MemoryRef(parsed.name, parsed.actor, parsed.stream, str(ref.target), parsed.remote)
        )
    out.sort(key=lambda r: r.name)
    return out


__all__ = ["git_dir", "list_memory_refs", "open_repository"]
