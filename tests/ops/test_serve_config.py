"""``pal serve --config FILE``: documented keys, checked before the server starts; flags and
environment override the file."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from palimpsest.cli import serve_config
from palimpsest.errors import InvalidInput
from tests.api.server import pal_command


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_every_key_is_read(tmp_path: Path) -> None:
    config = _write(tmp_path / "serve.toml", f"""
data_dir = "{tmp_path / 'store'}"
host = "127.0.0.1"
port = 0
allowed_hosts = ["Memory.Example.org"]
log_level = "info"
durability = "full"
tracing = "console"
workers = 4
write_wait = 2
""")
    settings = serve_config.resolve({}, config)
    assert settings == serve_config.ServeSettings(
        data_dir=tmp_path / "store", host="127.0.0.1", port=0,
        allowed_hosts=("memory.example.org",), log_level="info", durability="full",
        tracing="console", workers=4, write_wait=2.0)
    assert set(serve_config.KEYS) == {f.name for f in
                                      serve_config.ServeSettings.__dataclass_fields__.values()}


def test_flags_and_environment_win_over_the_file(tmp_path: Path) -> None:
    config = _write(tmp_path / "serve.toml", 'port = 9000\nlog_level = "info"\n')
    settings = serve_config.resolve({"port": 0, "log_level": None}, config)
    assert settings.port == 0 and settings.log_level == "info"
    assert serve_config.resolve({}, None).port == 8765  # the default without a file


@pytest.mark.parametrize(("text", "message"), [
    ("prot = 1\n", "unknown key(s) prot"),
    ('port = "8765"\n', "port must be an integer from 0 to 65535"),
    ("port = 70000\n", "port must be an integer from 0 to 65535"),
    ('log_level = "debug"\n', "log_level must be one of critical, error, warning, info"),
    ('allowed_hosts = "a.example"\n', "allowed_hosts must be a list of host names"),
    ("durability = true\n", "durability must be one of normal, full"),
    ("workers = 0\n", "workers must be an integer from 1 to 64"),
    ("workers = 2.5\n", "workers must be an integer from 1 to 64"),
    ("write_wait = 0\n", "write_wait must be a number of seconds above 0 and at most 600"),
    ('write_wait = "5"\n', "write_wait must be a number of seconds above 0 and at most 600"),
    ("port = \n", "is not valid TOML"),
])
def test_bad_files_are_refused_by_name(tmp_path: Path, text: str, message: str) -> None:
    config = _write(tmp_path / "serve.toml", text)
    with pytest.raises(InvalidInput) as refused:
        serve_config.resolve({}, config)
    assert message in refused.value.message
    assert refused.value.code == "invalid-config"


def test_pal_serve_runs_from_a_config_file(tmp_path: Path) -> None:
    store = tmp_path / "store"
    config = _write(tmp_path / "serve.toml", f'data_dir = "{store}"\nport = 9\n')
    env = {**os.environ, "PAL_PORT": "0"}  # the environment beats the file's port
    proc = subprocess.Popen(pal_command("serve", "--config", str(config), "--json"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        announce = json.loads(proc.stdout.readline())
        assert announce["data_dir"] == str(store) and announce["port"] != 9
        assert (store / "palimpsest.db").is_file()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_pal_serve_refuses_a_bad_config_before_starting(tmp_path: Path) -> None:
    config = _write(tmp_path / "serve.toml", "colour = 'blue'\n")
    result = subprocess.run(pal_command("serve", "--config", str(config)), capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("pal: ") and "unknown key(s) colour" in result.stderr
