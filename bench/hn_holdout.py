"""Acceptance check against the held-out upstream fixture (never a test, never tuned against).

``python bench/hn_holdout.py [--processes]`` unpacks ``../shared/interop/hn-memory-v0-holdout``
(its README: every ref fetched from ``repo.bundle``, ``main`` checked out) into a temporary
directory and runs every recall, show and expected-failure command of its ``manifest.json``
through ``pal memory`` — in this process, one after another over one index, so the recalls at
other commits, paths and subjects alternate contexts as an agent's would — and compares the
stdout bytes with the upstream output (for failures: the upstream message must appear on
stderr and the exit status must be 1).  ``--processes`` runs each command as a whole ``pal``
process instead.  It also compares ``pal memory index rebuild``'s line and prints one JSON
summary with every mismatch.  The fixture is the acceptance set: build tests from the main
fixture and the specification, not from these files.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HOLDOUT = Path(os.environ.get("PAL_SHARED", ROOT.parent / "shared")) / "interop"
HOLDOUT = HOLDOUT / "hn-memory-v0-holdout"


def _git(*args: str, env: dict[str, str]) -> None:
    subprocess.run(["git", *args], check=True, env=env, capture_output=True)


def unpack(target: Path) -> Path:
    """The holdout repository with every ref, ``main`` checked out (README "Unpacking")."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    repo = target / "repo"
    _git("init", "-q", "-b", "main", str(repo), env=env)
    bundle = str(HOLDOUT / "repo.bundle")
    _git("-C", str(repo), "fetch", "-q", "--update-head-ok", bundle, "+refs/*:refs/*", env=env)
    _git("-C", str(repo), "reset", "-q", "--hard", env=env)
    return repo


def run_in_process(repo: Path, argv: list[str]) -> tuple[int, bytes, str]:
    """``pal memory --repo REPO ARGV`` through the CLI entry point in this process."""
    from palimpsest.cli.main import main

    out, err = io.BytesIO(), io.StringIO()
    wrapper = io.TextIOWrapper(out, encoding="utf-8")
    code = 0
    with contextlib.redirect_stdout(wrapper), contextlib.redirect_stderr(err):
        try:
            main(["memory", "--repo", str(repo), *argv])
        except SystemExit as exc:
            code = int(exc.code or 0)
        wrapper.flush()
    return code, out.getvalue(), err.getvalue()


def run_process(repo: Path, argv: list[str]) -> tuple[int, bytes, str]:
    """The same command as a whole ``pal`` process."""
    done = subprocess.run(
        [sys.executable, "-m", "palimpsest.cli.main", "memory", "--repo", str(repo), *argv],
        capture_output=True, check=False, timeout=300,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", action="store_true", help="one pal process per command")
    args = parser.parse_args()
    manifest: dict[str, Any] = json.loads((HOLDOUT / "manifest.json").read_text("utf-8"))
    run = run_process if args.processes else run_in_process
    mismatches: list[dict[str, Any]] = []
    checked = 0
    with tempfile.TemporaryDirectory(prefix="pal-holdout-") as tmp:
        repo = unpack(Path(tmp))
        for entry in [*manifest["recall"], *manifest["show"]]:
            argv = entry["argv"][2:]
            code, stdout, stderr = run(repo, argv)
            expected = (HOLDOUT / entry["file"]).read_bytes()
            checked += 1
            if code != 0 or stdout != expected:
                mismatches.append({"argv": argv, "file": entry["file"], "exit": code,
                                   "stderr": stderr[-300:]})  # fmt: skip
        for entry in manifest["errors"]:
            argv = entry["argv"][2:]
            code, stdout, stderr = run(repo, argv)
            checked += 1
            if code != 1 or stdout or entry["expectedError"] not in stderr:
                mismatches.append({"argv": argv, "expected": entry["expectedError"],
                                   "exit": code, "stderr": stderr[-300:]})  # fmt: skip
        code, stdout, _ = run(repo, ["index", "rebuild"])
        checked += 1
        if stdout.decode() != manifest["indexRebuild"]["stdout"]:
            mismatches.append({"argv": ["index", "rebuild"], "stdout": stdout.decode()})
    print(json.dumps({"checked": checked, "mismatches": mismatches}, indent=2))
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
