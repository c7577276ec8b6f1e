"""Partial clones: recall and grep never fetch, with or without ``GIT_NO_LAZY_FETCH=1``.

pal reads Git through libgit2 (pygit2), which has no promisor support: a missing object is an
error, never a download.  These tests use a real promisor remote (a ``file://`` URL and a
``--filter=blob:none`` clone): memory commits and trees are present, their blobs are not.  They
pin what happens:

- with ``GIT_NO_LAZY_FETCH=1`` (and without it) recall and grep fail with a clear
  ``object-unavailable`` message, and no object or pack is added to the clone;
- after the user fetches the objects explicitly, recall answers exactly as in the origin;
- a repository that declares ``extensions.partialclone`` (written by some Git versions) is
  refused by libgit2 when it is opened: a clear one-line error, no read at all.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pygit2
import pytest

from palimpsest.identity import Identity
from tests.hn.recall_helpers import new_repo, pal, remember


def _git(*args: str, cwd: Path | None = None, stdin: bytes | None = None) -> bytes:
    result = subprocess.run(
        ["git", *args], cwd=cwd, input=stdin, capture_output=True, check=True, timeout=60
    )
    return result.stdout


def _objects(repo: Path) -> list[str]:
    found = []
    for root, _dirs, files in os.walk(repo / ".git" / "objects"):
        found += [os.path.join(root, f) for f in files]
    return sorted(found)


@pytest.fixture
def partial(tmp_path: Path, alice: Identity) -> tuple[Path, Path, str]:
    origin = new_repo(tmp_path / "origin", trusted=[alice])
    memory = remember(origin, alice, "stream isolation decided", topics=("architecture",))
    _git("-C", str(tmp_path / "origin"), "config", "uploadpack.allowFilter", "true")
    clone = tmp_path / "clone"
    _git("clone", "-q", "--filter=blob:none", "--no-checkout", f"file://{tmp_path / 'origin'}",
         str(clone))  # fmt: skip
    _git("-C", str(clone), "fetch", "-q", "origin", "+refs/hn/*:refs/hn/*")
    return tmp_path / "origin", clone, memory.memory_id


def _blob_missing(clone: Path, memory_commit_tree_path: str = "memory.json") -> bool:
    repo = pygit2.Repository(str(clone))
    ref = next(r for r in repo.references if r.startswith("refs/hn/memory/"))
    commit = repo.references[ref].peel(pygit2.Commit)
    blob_id = commit.tree[memory_commit_tree_path].id
    return blob_id not in repo.odb


@pytest.mark.parametrize("no_lazy", ["1", None], ids=["GIT_NO_LAZY_FETCH=1", "unset"])
def test_reads_never_fetch(partial: tuple[Path, Path, str], no_lazy: str | None) -> None:
    _origin, clone, _memory = partial
    assert _git("-C", str(clone), "config", "remote.origin.promisor").strip() == b"true"
    assert _blob_missing(clone)
    before = _objects(clone)
    env = {"GIT_NO_LAZY_FETCH": no_lazy} if no_lazy else None
    for args in (["recall", "--json"], ["grep", "--json", "isolation"]):
        result = pal(clone, *args, env=env)
        assert result.returncode == 1 and result.stdout == b""
        assert result.stderr.startswith(b"pal: a Git object needed to read memory is not")
        assert result.stderr.count(b"\n") == 1
    assert _objects(clone) == before  # nothing was downloaded
    assert _blob_missing(clone)


def test_explicitly_fetched_objects_are_read(partial: tuple[Path, Path, str]) -> None:
    origin, clone, memory = partial
    # The user's explicit choice: let Git fetch the missing objects (git cat-file does so in
    # a partial clone), then recall reads them like any complete repository.
    listing = _git("-C", str(clone), "rev-list", "--objects", "--all", "--missing=print")
    wanted = b"\n".join(line[1:].split()[0] for line in listing.splitlines() if line[:1] == b"?")
    _git("-C", str(clone), "cat-file", "--batch-check", stdin=wanted + b"\n")
    assert not _blob_missing(clone)
    result = pal(clone, "recall", "--json")
    assert result.returncode == 0, result.stderr
    assert [m["id"] for m in json.loads(result.stdout)["memories"]] == [memory]
    assert result.stdout == pal(origin, "recall", "--json").stdout


def test_partialclone_extension_is_refused_clearly(partial: tuple[Path, Path, str]) -> None:
    _origin, clone, _memory = partial
    _git("-C", str(clone), "config", "extensions.partialclone", "origin")
    before = _objects(clone)
    result = pal(clone, "recall", "--json", env={"GIT_NO_LAZY_FETCH": "1"})
    assert result.returncode == 1 and result.stdout == b""
    assert b"unsupported extension name extensions.partialclone" in result.stderr
    assert result.stderr.startswith(b"pal: ") and result.stderr.count(b"\n") == 1
    assert _objects(clone) == before
