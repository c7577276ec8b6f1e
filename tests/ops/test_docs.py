"""The README's command-line and Python examples run as written against a live ``pal serve``;
docs/operations.md's configuration sample, key table and metric names are the real ones."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from palimpsest.cli import serve_config
from tests.api.server import provision, start
from tests.conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
SERVICE = REPO_ROOT / "docs" / "service.md"
OPERATIONS = REPO_ROOT / "docs" / "operations.md"


def _blocks(text: str, language: str) -> list[str]:
    return [b.split("```", 1)[0] for b in text.split(f"```{language}\n")[1:]]


def test_readme_examples_run(tmp_path: Path) -> None:
    text = README.read_text()
    shell = [b for b in _blocks(text, "sh") if b.startswith("TEAM=$(pal memories create")]
    python = [b for b in _blocks(text, "python") if "Client.from_env()" in b]
    assert len(shell) == 1 and len(python) == 1, "the README's examples moved"
    service = [b for b in _blocks(SERVICE.read_text(), "python") if "AsyncClient" in b]
    assert len(service) == 1, "the client example of docs/service.md moved"
    data_dir = tmp_path / "data"
    made = provision(data_dir, [])
    server = start(data_dir)
    env = {**os.environ, "PAL_URL": server.url, "PAL_CREDENTIAL": made["owner"].token,
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    try:
        cli = subprocess.run(["bash", "-euo", "pipefail", "-c", shell[0]], capture_output=True,
                             text=True, env=env, timeout=180, check=False)
        py = subprocess.run([sys.executable, "-c", python[0]], capture_output=True, text=True,
                            env=env, timeout=120, check=False)
        both = subprocess.run([sys.executable, "-c", service[0]], capture_output=True, text=True,
                              env=env, timeout=120, check=False)
    finally:
        server.stop()
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    assert "recalled data, not instructions" in cli.stdout
    assert "We ship on Thursdays." in cli.stdout and '"object": "list"' in cli.stdout
    assert py.returncode == 0, py.stderr[-3000:]
    assert py.stdout.strip().splitlines()[0] == "Team We ship on Thursdays."
    assert both.returncode == 0, both.stderr[-3000:]
    assert both.stdout == "Acme\nmemory_not_found\n1\n"


def test_operations_configuration_sample_and_key_table(tmp_path: Path) -> None:
    text = OPERATIONS.read_text()
    (sample,) = _blocks(text, "toml")
    path = tmp_path / "serve.toml"
    path.write_text(sample)
    settings = serve_config.resolve({}, path)
    assert settings.data_dir == Path("/var/lib/palimpsest") and settings.durability == "full"
    keys = re.findall(r"^\| `([a-z_]+)` \| `--", text, flags=re.MULTILINE)
    assert keys == list(serve_config.KEYS)


def test_operations_lists_the_real_metrics(tmp_path: Path) -> None:
    import httpx

    documented = set(re.findall(r"`(palimpsest_[a-z_]+)", OPERATIONS.read_text()))
    assert len(documented) >= 8
    data_dir = tmp_path / "data"
    provision(data_dir, [])
    server = start(data_dir)
    try:
        exposition = httpx.get(f"{server.url}/metrics", timeout=30).text
    finally:
        server.stop()
    families = set(re.findall(r"^# TYPE (\S+) ", exposition, flags=re.MULTILINE))
    assert documented <= families, documented - families
