"""Hostile repository configuration and environment (security-tests.md §3 C16).

Every Git subprocess of replication runs with a scrubbed environment, system and global config
disabled, ``GIT_NO_LAZY_FETCH=1``, and hooks and fsmonitor neutralised with ``-c``.  Each test
arms canaries that would fire if that were not so, and checks a control that shows the canary
does fire for plain Git.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from palimpsest.hn import replication
from palimpsest.hn.replication.transport import run_git
from tests.replication.helpers import clone, fixture_remote, git, pal, refs

README_BLOB = "9df986842dc8b2fb4b09431700fa3a4860523ab0"


def _canary_script(path: Path, canary: Path, then: str = "exit 0") -> Path:
    path.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {canary}\n{then}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_hooks_fsmonitor_and_inherited_git_config_are_neutralised(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    remote = fixture_remote(tmp_path / "remote.git")
    work = clone(f"file://{remote}", tmp_path / "clone")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in ("reference-transaction", "pre-push", "post-checkout", "post-merge",
                 "pre-auto-gc", "fsmonitor-watchman"):  # fmt: skip
        _canary_script(hooks / name, canary)
    monitor = _canary_script(tmp_path / "monitor.sh", canary)
    git("config", "core.hooksPath", str(hooks), cwd=work)
    git("config", "core.fsmonitor", str(monitor), cwd=work)
    hostile_global = tmp_path / "hostile.gitconfig"
    hostile_global.write_text(f"[core]\n\tfsmonitor = {monitor}\n\thooksPath = {hooks}\n")
    # control: plain Git in this clone does run the hook
    git("update-ref", "refs/heads/control", "HEAD", cwd=work)
    assert canary.exists()
    canary.unlink()
    git("update-ref", "-d", "refs/heads/control", cwd=work)
    canary.unlink()

    done = pal(
        "sync", "--json", cwd=work,
        env={
            "GIT_CONFIG_GLOBAL": str(hostile_global),
            "GIT_CONFIG_NOSYSTEM": "0",
            "GIT_CONFIG_PARAMETERS": f"'core.hookspath'='{hooks}'",
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "core.fsmonitor",
            "GIT_CONFIG_VALUE_0": str(monitor),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(tmp_path / "nowhere"),
        },
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {m["status"] for m in json.loads(done.stdout)["memories"]} == {"promoted"}
    assert not canary.exists(), canary.read_text()
    assert len(refs(work, "refs/hn/remotes/")) == 2


def _partial_clone(tmp_path: Path, canary: Path) -> Path:
    remote = fixture_remote(tmp_path / "remote.git")
    git("config", "uploadpack.allowFilter", "true", cwd=remote)
    work = clone(f"file://{remote}", tmp_path / "partial", "--filter=blob:none", "--no-checkout")
    spy = _canary_script(tmp_path / "upload-pack.sh", canary, 'exec git-upload-pack "$@"')
    git("config", "remote.origin.uploadpack", str(spy), cwd=work)
    return work


def test_no_lazy_fetch_in_a_partial_clone(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    work = _partial_clone(tmp_path, canary)
    done = run_git(["cat-file", "-p", README_BLOB], git_dir=work / ".git", check=False)
    assert done.returncode != 0
    assert not canary.exists()
    # control: plain Git lazily fetches the blob through the configured upload-pack
    plain = subprocess.run(["git", "cat-file", "-p", README_BLOB], cwd=work,
                           capture_output=True, check=False, env=dict(os.environ))  # fmt: skip
    assert plain.returncode == 0
    assert canary.exists()


def test_sync_into_a_partial_clone_fetches_nothing_lazily(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    work = _partial_clone(tmp_path, canary)
    report = replication.sync(work, "origin")
    # Streams are fetched explicitly (not lazily) into quarantine; anchors and evidence resolve
    # from commits and trees, which a blob:none clone has.  The spy upload-pack is not used:
    # replication passes the URL, never the remote's configured upload-pack.
    assert {m.status for m in report.memories} == {"promoted"}
    assert not canary.exists()
