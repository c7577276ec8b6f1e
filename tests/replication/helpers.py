"""Test helpers: plain Git plumbing, the interop fixture as a remote, and ``pal`` as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import INTEROP, REPO_ROOT

ALICE = "56475aa75463474c0285df5dbf2bcab73da651358839e9b77481b2eab107708c"
BOB = "24f6ed6acbfe1009c030d7ca567c33ca4830911498236b5561a6c82abec5de28"
ALICE_STREAM = "sha256:f298f9e0f0a75b23be66e545312634172c9f0c207ebc99725c680aebe17ed5ce"
BOB_STREAM = "sha256:6527b8955d22141066a742e6559d268d842d72bfdb9a1d4405beab709fecfaf8"
ALICE_HEAD = "7ec5df55307f4ed38270b14758f2a0eea34baef5"
BOB_HEAD = "11c532b21704bc0e46ed7a2f37c5ade1555d0649"


def git(*args: str, cwd: Path | None = None, check: bool = True, stdin: bytes | None = None) -> str:
    """Run git (the test environment is already scrubbed by tests/conftest.py)."""
    done = subprocess.run(
        ["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr.decode()}")
    return done.stdout.decode("utf-8", "replace")


def refs(repo: Path, prefix: str = "refs/") -> dict[str, str]:
    """``{ref: oid}`` below ``prefix``."""
    out = git("for-each-ref", "--format=%(objectname) %(refname)", prefix, cwd=repo)
    return {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in out.splitlines()}


def accepted_ref(remote: str, actor: str, stream: str) -> str:
    """``refs/hn/remotes/<remote>/memory/<actor>/<stream hex>``."""
    return f"refs/hn/remotes/{remote}/memory/{actor}/{stream.removeprefix('sha256:')}"


def fixture_remote(path: Path) -> Path:
    """A bare repository holding every ref of the interop fixture bundle."""
    git("init", "--bare", "-q", str(path))
    git("fetch", "-q", str(INTEROP / "fixture.bundle"), "refs/*:refs/*", cwd=path)
    git("symbolic-ref", "HEAD", "refs/heads/main", cwd=path)
    return path


def clone(url: str, path: Path, *extra: str) -> Path:
    """``git clone`` (branches only: memory refs are not cloned)."""
    git("clone", "-q", *extra, url, str(path))
    return path


def pal(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``pal`` as a separate process (so crash tests can kill it)."""
    full = dict(os.environ)
    full["PYTHONPATH"] = str(REPO_ROOT / "src")
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "palimpsest.cli.main", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        check=False,
    )
