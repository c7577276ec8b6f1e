"""The reader's raw object reads give exactly libgit2's answers: loose objects read directly,
packed ones, linked worktrees and damaged loose files through libgit2."""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import pygit2
import pytest

from palimpsest.errors import InvalidInput
from palimpsest.hn import store
from palimpsest.hn.store.objects import ObjectReader
from palimpsest.identity import Identity
from tests.hn.conftest import git_env
from tests.hn.recall_helpers import new_repo, remember


def _objects(repo: pygit2.Repository) -> list[pygit2.Oid]:
    return list(repo.odb)


@pytest.fixture
def repo(tmp_path: Path, alice: Identity) -> pygit2.Repository:
    repo = new_repo(tmp_path / "repo", trusted=[alice])
    for n in range(3):
        remember(repo, alice, f"memory {n} <with> & escapes", topics=("t",))
    return repo


def _loose_path(repo: pygit2.Repository, oid: pygit2.Oid) -> Path:
    hexid = str(oid)
    return Path(repo.path) / "objects" / hexid[:2] / hexid[2:]


def test_loose_reads_equal_libgit2(repo: pygit2.Repository) -> None:
    reader = ObjectReader(repo)
    oids = _objects(repo)
    assert oids and all(_loose_path(repo, oid).exists() for oid in oids)
    for oid in oids:
        kind, data = repo.odb.read(oid)
        assert reader.read(oid.raw) == (int(kind), data)


def test_packed_objects_are_read_through_libgit2(repo: pygit2.Repository, tmp_path: Path) -> None:
    subprocess.run(["git", "-C", repo.workdir, "gc", "-q", "--prune=now"], check=True,
                   env=git_env(tmp_path))  # fmt: skip
    repo = pygit2.Repository(repo.path)
    oids = _objects(repo)
    assert oids and not any(_loose_path(repo, oid).exists() for oid in oids)
    reader = ObjectReader(repo)
    for oid in oids:
        kind, data = repo.odb.read(oid)
        assert reader.read(oid.raw) == (int(kind), data)
    assert len(store.collect(repo)) == 3


def test_a_linked_worktree_reads_the_common_objects(
    repo: pygit2.Repository, tmp_path: Path
) -> None:
    linked = tmp_path / "linked"
    subprocess.run(["git", "-C", repo.workdir, "worktree", "add", "-q", str(linked)],
                   check=True, env=git_env(tmp_path))  # fmt: skip
    other = store.open_repository(linked)
    assert Path(other.path) != Path(repo.path)
    reader = ObjectReader(other)
    assert reader._dir == str(Path(repo.path).resolve() / "objects") + "/"
    for oid in _objects(repo):
        assert reader.read(oid.raw) == (int(repo.odb.read(oid)[0]), repo.odb.read(oid)[1])


def _damage(repo: pygit2.Repository, oid: pygit2.Oid, how: str, donor: pygit2.Oid) -> None:
    path = _loose_path(repo, oid)
    os.chmod(path, 0o644)
    original = path.read_bytes()
    if how == "other-object":
        path.write_bytes(_loose_path(repo, donor).read_bytes())
    elif how == "truncated":
        path.write_bytes(original[: len(original) // 2])
    elif how == "not-zlib":
        path.write_bytes(b"plain bytes")
    else:
        kind, data = repo.odb.read(oid)
        header = {1: b"commit", 2: b"tree", 3: b"blob"}[int(kind)]
        path.write_bytes(zlib.compress(header + b" 1\0" + data))


DAMAGE = ["other-object", "truncated", "not-zlib", "wrong-size"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_memory_object_fails_closed_without_hanging(
    repo: pygit2.Repository, damage: str
) -> None:
    # libgit2 1.9 never returns from reading a truncated loose object; the reader must not
    # hand it one.
    memory = store.collect(repo)[1]
    tree = repo[pygit2.Oid(hex=memory.commit)].tree  # type: ignore[attr-defined]
    payload, signature = tree["memory.json"].id, tree["signature"].id
    _damage(repo, payload, damage, signature)
    with pytest.raises(pygit2.GitError, match="damaged"):
        ObjectReader(pygit2.Repository(repo.path)).read(payload.raw)
    with pytest.raises(InvalidInput) as info:
        store.collect(pygit2.Repository(repo.path))
    assert info.value.code == "invalid-memory-stream"
    assert "blob object is missing" in info.value.message


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_loose_copy_of_a_packed_object_reads_the_pack(
    repo: pygit2.Repository, tmp_path: Path, damage: str
) -> None:
    oids = _objects(repo)
    victim, donor = oids[0], oids[1]
    expected = repo.odb.read(victim)
    loose = {oid: _loose_path(repo, oid).read_bytes() for oid in (victim, donor)}
    subprocess.run(["git", "-C", repo.workdir, "repack", "-q", "-a", "-d"], check=True,
                   env=git_env(tmp_path))  # fmt: skip
    for oid, data in loose.items():  # a stale loose copy beside the pack
        _loose_path(repo, oid).parent.mkdir(exist_ok=True)
        _loose_path(repo, oid).write_bytes(data)
    _damage(repo, victim, damage, donor)
    assert ObjectReader(pygit2.Repository(repo.path)).read(victim.raw) == (
        int(expected[0]), expected[1],
    )  # fmt: skip
