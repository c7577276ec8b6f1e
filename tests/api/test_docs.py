"""docs/service.md: the curl walk-through runs as written against a live ``pal serve``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.api.server import provision, start

DOC = Path(__file__).resolve().parents[2] / "docs" / "service.md"


def _walkthrough() -> str:
    text = DOC.read_text()
    section = text.split("## A walk through the API with curl", 1)[1].split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in section.split("```sh\n")[1:]]
    script = [b for b in blocks if b.startswith("auth=(")]
    assert len(script) == 1, "the walk-through block moved"
    return script[0]


def test_curl_walkthrough_runs(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    made = provision(data_dir, [("helper", "agent")], {"support": ["helper"]})
    server = start(data_dir)
    try:
        env = {**os.environ, "PAL": server.url, "TOKEN": made["owner"].token,
               "GROUP": made["group:support"]}
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", _walkthrough()],
                                capture_output=True, text=True, env=env, timeout=120,
                                check=False)
    finally:
        server.stop()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert '"memories":true' in out  # discovery
    assert "Acme renews every March" in out  # recall found it below the company memory
    assert "quarterly numbers" in out  # the file's bytes came back
    assert "Answer customers within one business day." in out  # primed
    assert '"object":"memory.erasure"' in out
