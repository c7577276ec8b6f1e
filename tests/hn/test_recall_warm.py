"""The warm recall (no Git, no libgit2 start-up) gives exactly the Git path's bytes, and steps
aside whenever Git must be asked; the ref files it reads give libgit2's answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest

from palimpsest.hn import store
from palimpsest.hn.recall import recall, recall_kept
from palimpsest.hn.recall.request import RecallRequest, normalize_request
from palimpsest.hn.store import headfiles
from palimpsest.identity import Identity
from tests.hn.conftest import git_env
from tests.hn.recall_helpers import (
    CAROL,
    commit_files,
    head,
    lifecycle,
    new_repo,
    pal,
    policy_bytes,
    remember,
)


def _git(repo: pygit2.Repository) -> headfiles.GitDir:
    found = headfiles.locate(repo.workdir or repo.path)
    assert found is not None
    return found


def _both(repo: pygit2.Repository, request: RecallRequest) -> tuple[bytes | None, bytes]:
    """The warm answer (None when it steps aside) and the Git path's, in that order."""
    kept = recall_kept(_git(repo), request, explain=True)
    through_git = recall(repo, request, explain=True)
    if kept is not None:
        assert kept.to_human() == through_git.to_human()
    return (None if kept is None else kept.to_json()), through_git.to_json()


def test_warm_answers_equal_the_git_path_and_step_aside_when_needed(
    tmp_path: Path, alice: Identity, bob: Identity
) -> None:
    repo = new_repo(tmp_path / "repo", trusted=[alice])
    first = remember(repo, alice, "first note", topics=("t",), timestamp="2026-09-01T12:00:01Z")
    ask = normalize_request(at_commit=head(repo))
    assert recall_kept(_git(repo), ask) is None  # nothing kept for this commit yet
    kept, git = _both(repo, ask)
    assert kept is None  # still: the Git path just kept the answers
    kept, git = _both(repo, ask)
    assert kept == git
    # A memory ref moves: Git is asked once, then the answer is kept again.
    remember(repo, bob, "bob's note", timestamp="2026-09-01T12:00:02Z")
    assert recall_kept(_git(repo), ask) is None
    recall(repo, ask)
    assert recall_kept(_git(repo), ask) is not None
    # HEAD moves (and the policy with it): a new query commit, answered warm from its loose
    # objects on top of what is kept for its parent.
    commit_files(repo, {".hn/policy.json": policy_bytes([alice.actor, bob.actor])}, "policy")
    moved = normalize_request(at_commit=head(repo), include_untrusted=True, lifecycle=["all"])
    kept, git = _both(repo, moved)
    assert kept == git
    steps = [
        moved,
        normalize_request(at_commit=head(repo), max_records=1, include_untrusted=True),
        normalize_request(at_commit=head(repo), topic=["t"], query="first"),
        normalize_request(at_commit=ask.at_commit),  # the older commit is still kept
    ]
    lifecycle(repo, alice, "retract", first.memory_id, timestamp="2026-09-01T12:00:03Z")
    remember(repo, CAROL, "carol arrives", timestamp="2026-09-01T12:00:04Z")
    for request in steps:
        recall(repo, request)
        kept, git = _both(repo, request)
        assert kept == git, request
    page = json.loads(recall(repo, steps[1]).to_json())
    assert page["truncated"] and page["nextCursor"]
    second = normalize_request(at_commit=head(repo), max_records=1, include_untrusted=True,
                               cursor=page["nextCursor"])  # fmt: skip
    kept, git = _both(repo, second)
    assert kept == git


def test_a_missing_object_being_waited_for_sends_the_warm_path_to_git(
    tmp_path: Path, alice: Identity
) -> None:
    repo = new_repo(tmp_path / "repo", trusted=[alice])
    absent = "e" * 40
    remember(repo, alice, "cites a commit we do not have", evidence=("git:" + absent,))
    ask = normalize_request(at_commit=head(repo))
    recall(repo, ask)
    assert recall_kept(_git(repo), ask) is None  # a row waits for that object: Git probes it


def test_the_warm_cli_never_starts_libgit2(tmp_path: Path, alice: Identity) -> None:
    repo = new_repo(tmp_path / "repo", trusted=[alice])
    remember(repo, alice, "a note")
    first = pal(repo.workdir, "recall", "--json")  # keeps the answers for HEAD
    assert first.returncode == 0, first.stderr
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    again = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "palimpsest.cli.main", "memory", "--repo",
         repo.workdir, "recall", "--json"],
        capture_output=True, env=env, check=False, timeout=120,
    )  # fmt: skip
    assert again.returncode == 0
    assert again.stdout == first.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in again.stderr.decode().splitlines()}
    assert "palimpsest.hn.recall.warm" in imported
    assert not {m for m in imported if m.split(".")[0] in ("pygit2", "cryptography", "re2")}


# ------------------------------------------------------------------------- ref files


def _refs_by_libgit2(repo: pygit2.Repository) -> list[tuple[str, str]]:
    return [(r.name, r.head) for r in store.list_memory_refs(repo)]


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(list(args), cwd=cwd, check=True, capture_output=True, env=git_env(cwd))


@pytest.fixture
def two_streams(tmp_path: Path, alice: Identity, bob: Identity) -> pygit2.Repository:
    repo = new_repo(tmp_path / "repo", trusted=[alice])
    remember(repo, alice, "a")
    remember(repo, bob, "b")
    name = store.remote_ref_name("origin", bob.actor, "sha256:" + "ab" * 32)
    repo.references.create(name, repo.references[store.list_memory_refs(repo)[0].name].target)
    return repo


def test_loose_and_packed_refs_read_as_libgit2_reads_them(
    two_streams: pygit2.Repository, alice: Identity
) -> None:
    repo = two_streams
    git = _git(repo)
    assert headfiles.memory_refs(git) == _refs_by_libgit2(repo)
    assert headfiles.resolve(git, "HEAD") == head(repo)
    _run("git", "pack-refs", "--all", cwd=Path(repo.workdir))
    assert not list((Path(repo.path) / "refs" / "hn").rglob("*"))  # now only packed
    assert headfiles.memory_refs(git) == _refs_by_libgit2(repo)
    assert headfiles.resolve(git, "HEAD") == head(repo)
    remember(repo, alice, "a loose ref over a packed one")
    assert headfiles.memory_refs(git) == _refs_by_libgit2(repo)


def test_worktrees_bare_and_detached_heads(two_streams: pygit2.Repository, tmp_path: Path) -> None:
    repo = two_streams
    linked = tmp_path / "linked"
    _run("git", "worktree", "add", "-q", "--detach", str(linked), cwd=Path(repo.workdir))
    commit_files(repo, {"later": b"x"}, "later")  # the main worktree moves on; linked does not
    other = store.open_repository(linked)
    git = headfiles.locate(linked / "sub") if (linked / "sub").mkdir() is None else None
    assert git is not None and git.common == str(Path(repo.path).resolve()).rstrip("/")
    assert headfiles.resolve(git, "HEAD") == head(other) != head(repo)
    assert headfiles.memory_refs(git) == _refs_by_libgit2(other)
    bare = tmp_path / "bare.git"
    _run("git", "clone", "-q", "--bare", repo.workdir, str(bare), cwd=tmp_path)
    found = headfiles.locate(bare)
    assert found is not None
    assert headfiles.resolve(found, "HEAD") == head(store.open_repository(bare))


@pytest.mark.parametrize("oddity", ["symbolic-memory-ref", "reftable", "unborn-head", "revision"])
def test_what_the_file_reader_does_not_read_goes_to_libgit2(
    two_streams: pygit2.Repository, oddity: str
) -> None:
    repo = two_streams
    git = _git(repo)
    if oddity == "symbolic-memory-ref":
        ref = store.list_memory_refs(repo)[0]
        (Path(repo.path) / ref.name).write_text("ref: refs/heads/main\n")
        assert headfiles.memory_refs(git) is None
        with pytest.raises(Exception, match="malformed memory ref"):
            store.list_memory_refs(repo)
    elif oddity == "reftable":
        (Path(repo.path) / "reftable").mkdir()
        assert headfiles.locate(repo.workdir) is None
    elif oddity == "unborn-head":
        (Path(repo.path) / "HEAD").write_text("ref: refs/heads/nowhere\n")
        assert headfiles.resolve(git, "HEAD") is None
    else:
        assert headfiles.resolve(git, "main") is None  # any revision but HEAD or a full ID
        assert headfiles.resolve(git, head(repo)) == head(repo)


def test_a_new_commit_on_top_is_answered_warm_from_its_loose_objects(
    tmp_path: Path, alice: Identity, bob: Identity
) -> None:
    repo = new_repo(tmp_path / "repo", trusted=[alice])
    remember(repo, alice, "before the commit")
    recall(repo, normalize_request(at_commit=head(repo)))  # HEAD is kept
    steps: list[dict[str, bytes]] = [
        {"code.txt": b"1"},  # the .hn tree did not change: its kept policy is reused
        {".hn/policy.json": policy_bytes([alice.actor, bob.actor])},  # a new policy blob
        {"more.txt": b"2"},
    ]
    for files in steps:
        commit_files(repo, files, "on top")
        request = normalize_request(at_commit=head(repo), include_untrusted=True)
        warm = recall_kept(_git(repo), request)
        assert warm is not None, files  # no libgit2 needed right after a commit
        assert warm.to_json() == recall(repo, request).to_json()
        remember(repo, bob, f"after {sorted(files)}")  # anchored at the new HEAD
        recall(repo, normalize_request(at_commit=head(repo)))
    # Two commits at once: the parent of the new HEAD was never asked about.
    commit_files(repo, {"a": b"a"}, "one")
    commit_files(repo, {"b": b"b"}, "two")
    request = normalize_request(at_commit=head(repo))
    assert recall_kept(_git(repo), request) is None
    assert recall(repo, request).to_json() == recall_kept(_git(repo), request).to_json()  # type: ignore[union-attr]
