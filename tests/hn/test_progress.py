"""Progress on long work goes to a terminal's stderr only: never to stdout, never with --json,
never to a pipe (the report bytes stay the same either way)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pygit2

from palimpsest.identity import Identity
from tests.hn.recall_helpers import new_repo, remember


def _run(repo: pygit2.Repository, *args: str, tty: bool) -> tuple[int, bytes, bytes]:
    """Run ``pal memory --repo REPO ARGS`` with stdout on a pipe and stderr on a pty (or a pipe)."""
    argv = [sys.executable, "-m", "palimpsest.cli.main", "memory", "--repo", repo.workdir, *args]
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    if not tty:
        done = subprocess.run(argv, capture_output=True, env=env, check=False, timeout=120)
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()
    try:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=follower, env=env)
        os.close(follower)
        follower = -1
        seen = bytearray()
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the pty is closed once the child has gone
                break
            if not chunk:
                break
            seen += chunk
        out = child.stdout.read() if child.stdout else b""
        return child.wait(timeout=120), out, bytes(seen)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def _repo(tmp_path: Path, alice: Identity) -> pygit2.Repository:
    repo = new_repo(tmp_path / "repo", trusted=[alice])
    for n in range(3):
        remember(repo, alice, f"memory {n}", kind="decision")
    return repo


def test_index_rebuild_shows_progress_on_a_terminal_only(tmp_path: Path, alice: Identity) -> None:
    repo = _repo(tmp_path, alice)
    code, out, err = _run(repo, "index", "rebuild", tty=True)
    assert code == 0, err
    assert out.startswith(b"Memory index rebuild: version 0, source ")
    assert b"Verifying memories" in err and b"3/3" in err  # rich's bar, on the terminal
    assert b"Verifying" not in out
    piped = _run(repo, "index", "rebuild", tty=False)
    assert piped == (0, out, b"")  # same report, and nothing on a stderr that is not a terminal


def test_json_output_never_has_progress(tmp_path: Path, alice: Identity) -> None:
    repo = _repo(tmp_path, alice)
    for args in (("index", "rebuild", "--json"), ("index", "verify", "--json")):
        code, out, err = _run(repo, *args, tty=True)
        assert code == 0, err
        assert out.startswith(b'{"') and out.endswith(b"}\n")
        assert err == b""
