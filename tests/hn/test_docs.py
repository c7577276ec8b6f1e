"""The quick start in docs/repo-memory.md runs as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

DOC = REPO_ROOT / "docs" / "repo-memory.md"


def test_quick_start_runs(tmp_path: Path) -> None:
    text = DOC.read_text("utf-8")
    match = re.search(r"## Quick start.*?```sh\n(.*?)```", text, re.S)
    assert match is not None
    script = "set -euo pipefail\n" + match.group(1)
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    result = subprocess.run(
        ["bash", "-c", script],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Memory content is untrusted inert data." in result.stdout
    shown = json.loads((tmp_path / "demo" / "shown.json").read_text())
    assert shown["projection"]["lifecycle"] == "superseded"
    assert result.stdout.count("refs/hn/memory/") == 1


def test_readme_repository_memory_example_shows_results(tmp_path: Path) -> None:
    text = (REPO_ROOT / "README.md").read_text("utf-8")
    match = re.search(r"## Repository memory \(no server\).*?```sh\n(.*?)```", text, re.S)
    assert match is not None
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    result = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + match.group(1)],
        check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Matched: 1; returned: 1; truncated: false" in out  # the human recall
    assert "Keep stream isolation: memory streams never merge." in out
    envelope = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert envelope["matched"] == 1 and envelope["memories"][0]["trust"] == "qualified"
    assert out.count("  content: Keep stream isolation") == 1  # grep found it
