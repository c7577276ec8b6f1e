"""Crash consistency (security-tests.md §5): kill ``pal sync`` at every phase with the test-only
hook ``PAL_TEST_SYNC_KILL_AT`` (the process SIGKILLs itself), then check that accepted refs moved
only if the ref transaction had committed, that no lock or pending state is left that blocks a
retry, and that a plain retry converges."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pygit2
import pytest

from palimpsest.hn import replication
from palimpsest.hn.envelope import default_stream
from tests.adversarial.replication import builder
from tests.replication.helpers import accepted_ref, clone, pal, refs

ALICE_STREAM = default_stream(builder.ALICE.actor)
CAROL_STREAM = default_stream(builder.CAROL.actor)


def _wait_for_no_ref_locks(git_dir: Path) -> list[Path]:
    # A killed sync's `git update-ref --stdin` child aborts on EOF and removes its lock files;
    # give that orphan a moment to exit (this bounds the wait, it asserts nothing about speed).
    deadline = time.monotonic() + 30
    while True:
        locks = [p for p in (git_dir / "refs").rglob("*.lock")]
        if not locks or time.monotonic() > deadline:
            return locks
        time.sleep(0.05)


@pytest.mark.parametrize("phase", replication.PHASES)
def test_kill_at_each_phase_then_retry(tmp_path: Path, phase: str) -> None:
    remote = builder.new_remote(tmp_path / "r.git")
    repo = pygit2.Repository(str(remote.path))
    entries = builder.chain(builder.ALICE, remote.base, 3)
    alice_ref = f"refs/hn/memory/{builder.ALICE.actor}/{ALICE_STREAM[7:]}"
    builder.set_ref(repo, alice_ref, builder.write_chain(repo, builder.ALICE, entries[:2]))
    work = clone(f"file://{remote.path}", tmp_path / "clone")
    replication.sync(work, "origin")
    before = refs(work, "refs/hn/remotes/")
    assert len(before) == 2
    # the remote moves on: Alice appends entry 3
    new_head = builder.write_chain(repo, builder.ALICE, entries[:3])
    builder.set_ref(repo, alice_ref, new_head)
    key = accepted_ref("origin", builder.ALICE.actor, ALICE_STREAM)
    after = {**before, key: new_head}

    killed = pal("sync", "--json", cwd=work, env={replication.KILL_ENV: phase})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert _wait_for_no_ref_locks(work / ".git") == []
    committed = replication.PHASES.index(phase) >= replication.PHASES.index("committed")
    assert refs(work, "refs/hn/remotes/") == (after if committed else before)
    assert refs(work, "refs/hn/memory/") == {}  # nothing leaked into the local namespace

    retry = pal("sync", "--json", cwd=work)
    assert retry.returncode == 0, retry.stderr
    report = json.loads(retry.stdout)
    assert refs(work, "refs/hn/remotes/") == after
    alice = next(m for m in report["memories"] if m["stream"] == ALICE_STREAM)
    assert alice["status"] == "promoted" and alice["unchanged"] is committed
    if phase in ("quarantined", "fetched", "measured", "validated", "recorded", "copied",
                 "prepared", "committed"):  # fmt: skip
        assert any(note.startswith("removed quarantine txn-") for note in report["recovered"])
    if phase in ("recorded", "copied", "prepared"):
        assert any(note.endswith(" was aborted") for note in report["recovered"])
    assert not list((work / ".git/hn/replication/quarantine").iterdir())
    for record in (work / ".git/hn/replication/transactions").glob("*.json"):
        assert json.loads(record.read_text())["status"] in ("committed", "aborted")


def test_concurrent_sync_is_refused(tmp_path: Path) -> None:
    remote = builder.new_remote(tmp_path / "r.git")
    work = clone(f"file://{remote.path}", tmp_path / "clone")
    with replication.sync_lock(work / ".git"):
        done = pal("sync", cwd=work)
    assert done.returncode == 1
    assert done.stderr.startswith("pal: another sync is running")
    assert refs(work, "refs/hn/remotes/") == {}


def test_quarantined_objects_are_never_a_recall_source(tmp_path: Path) -> None:
    """Kill a first sync after validation and the object copy, before the ref transaction: the
    quarantine (and even the main object store) hold the streams, yet the verified reader and
    recall see nothing, because only accepted refs are sources."""
    from palimpsest.hn import store
    from tests.replication.helpers import ALICE_HEAD, fixture_remote

    remote = fixture_remote(tmp_path / "remote.git")
    work = clone(f"file://{remote}", tmp_path / "clone")
    killed = pal("sync", cwd=work, env={replication.KILL_ENV: "copied"})
    assert killed.returncode == -signal.SIGKILL
    quarantines = list((work / ".git/hn/replication/quarantine").iterdir())
    assert len(quarantines) == 1
    assert pygit2.Oid(hex=ALICE_HEAD) in pygit2.Repository(str(quarantines[0])).odb
    assert store.collect(pygit2.Repository(str(work / ".git"))) == ()
    recall = pal("memory", "recall", "--include-untrusted", "--lifecycle", "all", "--json",
                 cwd=work)  # fmt: skip
    assert recall.returncode == 0, recall.stderr
    assert json.loads(recall.stdout)["memories"] == []
