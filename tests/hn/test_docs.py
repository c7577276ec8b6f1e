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
