"""Hostile remotes (security-tests.md §3 C9–C15): each bad stream is refused with its own
outcome, nothing from it reaches the main store, and Carol's independent stream is promoted."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from palimpsest.hn import replication
from palimpsest.hn.envelope import default_stream
from palimpsest.hn.replication.selection import Budgets, build_selection, save_selection
from tests.adversarial.replication import builder
from tests.replication.gitserve import serve_git
from tests.replication.helpers import accepted_ref, clone, git, refs


def _sync(tmp_path: Path, remote: builder.Remote, *, exact: bool = False) -> replication.SyncReport:
    work = clone(f"file://{remote.path}", tmp_path / "clone")
    if remote.budgets or exact:
        selection = build_selection(
            "origin",
            memories=sorted(remote.expected) if exact else [],
            all_streams=not exact,
            budgets=Budgets(**remote.budgets),
        )
        save_selection(work / ".git", selection)
    return replication.sync(work, "origin")


@pytest.mark.parametrize("case", sorted(builder.CASES))
def test_hostile_stream_refused_good_stream_promoted(tmp_path: Path, case: str) -> None:
    remote = builder.CASES[case](tmp_path / f"{case}.git")
    report = _sync(tmp_path, remote)
    got = {item.stream: item.status for item in report.memories}
    assert got == remote.expected, [item.to_json() for item in report.memories]
    work = tmp_path / "clone"
    accepted = refs(work, "refs/hn/remotes/")
    carol = default_stream(builder.CAROL.actor)
    assert accepted == {
        accepted_ref("origin", builder.CAROL.actor, carol): git(
            "rev-parse", f"refs/hn/memory/{builder.CAROL.actor}/{carol[7:]}", cwd=remote.path
        ).strip()
    }
    store = pygit2.Repository(str(work / ".git"))
    for head in remote.bad_heads:
        assert pygit2.Oid(hex=head) not in store.odb, "a refused stream's objects were copied"
    for item in report.memories:
        if item.status != "promoted":
            assert remote.reasons[item.stream] in item.diagnostic, item.diagnostic
    assert report.failed
    assert not list((work / ".git/hn/replication/quarantine").iterdir())


def test_exact_selection_reports_each_hostile_outcome(tmp_path: Path) -> None:
    remote = builder.missing_supersede_target(tmp_path / "r.git")
    report = _sync(tmp_path, remote, exact=True)
    bad = next(i for i in report.memories if i.status == "dependency-missing")
    assert bad.dependency is not None
    assert bad.dependency.kind == "lifecycle-target"
    assert bad.dependency.missing_id == builder.MISSING_TARGET
    assert bad.dependency.owner_stream == default_stream(builder.ALICE.actor)


def test_ambiguous_owner_diagnostic_names_both_owners(tmp_path: Path) -> None:
    report = _sync(tmp_path, builder.ambiguous_owners(tmp_path / "r.git"))
    bad = next(i for i in report.memories if i.status == "structurally-invalid")
    assert "ambiguous owners" in bad.diagnostic
    assert builder.ALICE.actor in bad.diagnostic and builder.MALLORY.actor in bad.diagnostic


@pytest.mark.parametrize("case", ["forged-signature", "malformed-object"])
def test_retry_of_refused_stream_still_fails(tmp_path: Path, case: str) -> None:
    """C14: no leftovers from the first attempt make a second fetch of the same data pass."""
    remote = builder.CASES[case](tmp_path / "r.git")
    first = _sync(tmp_path, remote)
    second = replication.sync(tmp_path / "clone", "origin")
    assert [(i.stream, i.status) for i in first.memories] == [
        (i.stream, i.status) for i in second.memories
    ]


def _rewrite_alice(remote: builder.Remote, entries: list[builder.Entry]) -> None:
    repo = pygit2.Repository(str(remote.path))
    head = builder.write_chain(repo, builder.ALICE, entries)
    stream = default_stream(builder.ALICE.actor)
    builder.set_ref(repo, f"refs/hn/memory/{builder.ALICE.actor}/{stream[7:]}", head)


def test_fork_over_time_and_rollback_keep_accepted_ref(tmp_path: Path) -> None:
    """C9/C11: the remote rewrites an accepted stream, then rolls it back."""
    remote = builder.new_remote(tmp_path / "r.git")
    good = builder.chain(builder.ALICE, remote.base, 2)
    _rewrite_alice(remote, good)
    work = clone(f"file://{remote.path}", tmp_path / "clone")
    first = replication.sync(work, "origin")
    assert {i.status for i in first.memories} == {"promoted"}
    ref = accepted_ref("origin", builder.ALICE.actor, default_stream(builder.ALICE.actor))
    before = refs(work, "refs/hn/remotes/")[ref]
    twin = builder.entry(builder.ALICE, 2, good[0].memory_id, remote.base, content="rewritten")
    _rewrite_alice(remote, [good[0], twin, builder.entry(
        builder.ALICE, 3, twin.memory_id, remote.base)])  # fmt: skip
    forked = replication.sync(work, "origin")
    alice = next(i for i in forked.memories if i.actor == builder.ALICE.actor)
    assert alice.status == "structurally-invalid"
    assert alice.diagnostic.startswith("fork: ") and "sequence 2" in alice.diagnostic
    assert refs(work, "refs/hn/remotes/")[ref] == before
    _rewrite_alice(remote, good[:1])
    rolled = replication.sync(work, "origin")
    alice = next(i for i in rolled.memories if i.actor == builder.ALICE.actor)
    assert alice.status == "structurally-invalid" and alice.diagnostic.startswith("rollback")
    assert refs(work, "refs/hn/remotes/")[ref] == before


def test_attachment_budget_refuses_before_validation(tmp_path: Path) -> None:
    remote = builder.extra_file(tmp_path / "r.git")
    remote.budgets["max_attachment_bytes"] = 16
    remote.expected[default_stream(builder.ALICE.actor)] = "over-budget"
    report = _sync(tmp_path, remote)
    alice = next(i for i in report.memories if i.actor == builder.ALICE.actor)
    assert alice.status == "over-budget" and "attachment bytes" in alice.diagnostic
    assert alice.measurement is not None and alice.measurement.attachment_bytes == 64


@pytest.mark.parametrize("case", ["forged-signature", "foreign-supersede", "over-budget"])
def test_hostile_stream_over_smart_http(tmp_path: Path, case: str) -> None:
    root = tmp_path / "served"
    root.mkdir()
    remote = builder.CASES[case](root / "hostile.git")
    with serve_git(root) as (base, log):
        work = clone(f"{base}/hostile.git", tmp_path / "clone")
        if remote.budgets:
            save_selection(work / ".git", build_selection(
                "origin", all_streams=True, budgets=Budgets(**remote.budgets)))  # fmt: skip
        report = replication.sync(work, "origin")
    assert {item.stream: item.status for item in report.memories} == remote.expected
    assert any(line.startswith("POST /hostile.git/git-upload-pack") for line in log)
    carol = default_stream(builder.CAROL.actor)
    assert list(refs(work, "refs/hn/remotes/")) == [
        accepted_ref("origin", builder.CAROL.actor, carol)
    ]
