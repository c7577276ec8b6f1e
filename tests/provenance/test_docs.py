"""docs/provenance.md: the walk-through runs as written against a live ``pal serve``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.api.server import provision, start

DOC = Path(__file__).resolve().parents[2] / "docs" / "provenance.md"


def test_the_walkthrough_runs(tmp_path: Path) -> None:
    section = DOC.read_text().split("## A walk through it", 1)[1]
    script = section.split("```sh\n", 1)[1].split("```", 1)[0]
    data_dir = tmp_path / "data"
    made = provision(data_dir, [("ops", "human")])
    server = start(data_dir)
    bin_dir = Path(sys.executable).parent  # `pal` of this interpreter's environment
    try:
        env = {**os.environ, "PAL": server.url, "TOKEN": made["ops"].token,
               "DATA": str(data_dir), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                                capture_output=True, text=True, env=env, timeout=120,
                                check=False)
    finally:
        server.stop()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "receipt verified: record hrec_" in result.stdout
    assert "verified 1 changesets, 1 signatures, 1 refs of 1 memories" in result.stdout
    assert f"remember member:{made['ops'].id}" in result.stdout
