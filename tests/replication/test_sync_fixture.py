"""select + sync over real Git transports with the interop fixture as the remote (§20)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from palimpsest.hn import store
from tests.replication.gitserve import serve_git
from tests.replication.helpers import (
    ALICE,
    ALICE_HEAD,
    ALICE_STREAM,
    BOB,
    BOB_HEAD,
    BOB_STREAM,
    accepted_ref,
    clone,
    fixture_remote,
    git,
    pal,
    refs,
)

EXPECTED_ACCEPTED = {
    accepted_ref("origin", ALICE, ALICE_STREAM): ALICE_HEAD,
    accepted_ref("origin", BOB, BOB_STREAM): BOB_HEAD,
}


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[str, list[str], Path]]:
    root = tmp_path / "served"
    root.mkdir()
    with serve_git(root) as (base, log):
        yield base, log, root


def _select_both(work: Path) -> None:
    done = pal("replication", "select", "--memory", ALICE_STREAM, "--memory", BOB_STREAM,
               cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr


def _check_accepted(work: Path, report: dict[str, object]) -> None:
    assert refs(work, "refs/hn/") == EXPECTED_ACCEPTED
    memories = report["memories"]
    assert isinstance(memories, list)
    assert {(m["stream"], m["status"]) for m in memories} == {
        (ALICE_STREAM, "promoted"), (BOB_STREAM, "promoted")
    }  # fmt: skip
    # the accepted streams load through the same verified reader as local streams
    repo = pygit2.Repository(str(work / ".git"))
    loaded = store.collect(repo)
    assert len(loaded) == 9
    assert not list((work / ".git/hn/replication/quarantine").iterdir())


def test_fixture_over_file_url(tmp_path: Path) -> None:
    remote = fixture_remote(tmp_path / "remote.git")
    work = clone(f"file://{remote}", tmp_path / "clone")
    assert refs(work, "refs/hn/") == {}
    _select_both(work)
    done = pal("sync", "--json", cwd=work)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    _check_accepted(work, report)
    txn = work / ".git/hn/replication/transactions" / f"{report['transaction']}.json"
    assert json.loads(txn.read_text())["status"] == "committed"
    again = pal("sync", cwd=work)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count(": promoted (unchanged)") == 2


def test_fixture_over_smart_http(tmp_path: Path,
                                 http_root: tuple[str, list[str], Path]) -> None:  # fmt: skip
    base, log, root = http_root
    fixture_remote(root / "fixture.git")
    work = clone(f"{base}/fixture.git", tmp_path / "clone")
    _select_both(work)
    done = pal("sync", "--json", cwd=work)
    assert done.returncode == 0, done.stderr
    _check_accepted(work, json.loads(done.stdout))
    assert any(line.startswith("POST /fixture.git/git-upload-pack") for line in log)


def test_human_output_lines(tmp_path: Path) -> None:
    remote = fixture_remote(tmp_path / "remote.git")
    work = clone(f"file://{remote}", tmp_path / "clone")
    done = pal("sync", cwd=work)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"Replication memory {BOB_STREAM}: promoted",
        f"Replication memory {ALICE_STREAM}: promoted",
    ]
    assert "\x1b" not in done.stdout + done.stderr


def test_unselected_and_unadvertised_streams(tmp_path: Path) -> None:
    remote = fixture_remote(tmp_path / "remote.git")
    work = clone(f"file://{remote}", tmp_path / "clone")
    absent = "sha256:" + "0" * 64
    pal("replication", "select", "--memory", ALICE_STREAM, "--memory", absent, cwd=work)
    done = pal("sync", "--json", cwd=work)
    assert done.returncode == 1
    assert done.stderr.startswith("pal: sync finished with 1 failed stream")
    report = json.loads(done.stdout)
    statuses = {m["stream"]: m["status"] for m in report["memories"]}
    assert statuses == {ALICE_STREAM: "promoted", absent: "dependency-missing"}
    # Bob's stream was not selected: not fetched, not accepted
    assert refs(work, "refs/hn/") == {accepted_ref("origin", ALICE, ALICE_STREAM): ALICE_HEAD}
    assert pygit2.Oid(hex=BOB_HEAD) not in pygit2.Repository(str(work / ".git")).odb


def test_actor_only_selection_imports_no_memory(tmp_path: Path) -> None:
    remote = fixture_remote(tmp_path / "remote.git")
    work = clone(f"file://{remote}", tmp_path / "clone")
    pal("replication", "select", "--actor", ALICE, cwd=work)
    done = pal("sync", "--json", cwd=work)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["memories"] == []
    assert report["selectors"][0]["status"] == "not-replicated"
    assert refs(work, "refs/hn/") == {}


def test_unknown_remote_and_bad_remote_name_refused(tmp_path: Path) -> None:
    work = tmp_path / "repo"
    git("init", "-q", str(work))
    done = pal("sync", "nowhere", cwd=work)
    assert done.returncode == 1 and done.stderr.startswith("pal: remote nowhere is not configured")
    done = pal("sync", "bad..name", cwd=work)
    assert done.returncode == 1 and done.stderr.startswith("pal: invalid remote name")
