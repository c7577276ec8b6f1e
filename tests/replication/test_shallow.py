"""``pal sync --recover-shallow`` (§20.5): recover exactly the history the selected streams need,
never unshallow anything else, never add a selector."""

from __future__ import annotations

import json
from pathlib import Path

from tests.replication.helpers import (
    ALICE_STREAM,
    BOB_STREAM,
    accepted_ref,
    clone,
    fixture_remote,
    git,
    pal,
    refs,
)

ANCHOR = "cdb398ec5d97d79e14ff239cdfb235e0f0dca7ca"  # every fixture memory's anchor (HEAD)
BASE = "bac807065ca11637596bc8bf27c2e1808feae0b1"  # A1's git evidence, parent of ANCHOR


def _shallow_clone(tmp_path: Path) -> tuple[Path, str]:
    remote = fixture_remote(tmp_path / "remote.git")
    work = clone(f"file://{remote}", tmp_path / "full")
    (work / "later.md").write_text("a later commit\n")
    git("add", "later.md", cwd=work)
    git("commit", "-q", "-m", "later", cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    tip = git("rev-parse", "HEAD", cwd=work).strip()
    shallow = clone(f"file://{remote}", tmp_path / "shallow", "--depth", "1")
    return shallow, tip


def _has(work: Path, oid: str) -> bool:
    done = git("cat-file", "-t", oid, cwd=work, check=False)
    return done.strip() == "commit"


def test_recover_shallow_fetches_only_the_missing_anchors(tmp_path: Path) -> None:
    work, tip = _shallow_clone(tmp_path)
    assert not _has(work, ANCHOR)
    pal("replication", "select", "--memory", ALICE_STREAM, "--memory", BOB_STREAM, cwd=work)
    selection = (work / ".git/hn/replication/selections/b3JpZ2lu.json").read_bytes()

    plain = pal("sync", "--json", cwd=work)
    assert plain.returncode == 1
    report = json.loads(plain.stdout)
    assert {m["status"] for m in report["memories"]} == {"dependency-missing"}
    deps = {m["stream"]: m["dependency"] for m in report["memories"]}
    assert deps[ALICE_STREAM]["missingId"] == BASE  # first in ID order: A1's git evidence
    assert deps[ALICE_STREAM]["dependencyKind"] == "evidence-git"
    assert deps[BOB_STREAM]["missingId"] == ANCHOR
    assert deps[BOB_STREAM]["dependencyKind"] in ("anchor-commit", "evidence-git")
    assert all("--recover-shallow" in dep["recovery"] for dep in deps.values())
    assert refs(work, "refs/hn/") == {}

    done = pal("sync", "--recover-shallow", "--json", cwd=work)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {m["status"] for m in report["memories"]} == {"promoted"}
    assert sorted(report["shallowRecovered"]) == sorted([ANCHOR, BASE])
    assert set(refs(work, "refs/hn/")) == {
        accepted_ref("origin", m["actor"], m["stream"]) for m in report["memories"]
    }
    # still shallow: exactly the recovered commits were added as shallow boundaries
    assert git("rev-parse", "--is-shallow-repository", cwd=work).strip() == "true"
    shallow = set((work / ".git/shallow").read_text().split())
    assert shallow == {tip, ANCHOR, BASE}
    assert (work / ".git/hn/replication/selections/b3JpZ2lu.json").read_bytes() == selection


def test_recover_shallow_needs_shallow_repo_and_exact_selection(tmp_path: Path) -> None:
    work, _tip = _shallow_clone(tmp_path)
    done = pal("sync", "--recover-shallow", cwd=work)
    assert done.returncode == 1
    assert done.stderr.startswith("pal: --recover-shallow needs a saved selection")
    full = tmp_path / "full"
    pal("replication", "select", "--memory", ALICE_STREAM, cwd=full)
    done = pal("sync", "--recover-shallow", cwd=full)
    assert done.returncode == 1
    assert done.stderr.startswith("pal: --recover-shallow needs a shallow repository")
