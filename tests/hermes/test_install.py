"""The installer's file and config side: what it writes, and how uninstall restores only what
is still as it left it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml

from palimpsest.errors import Conflict, InvalidInput
from palimpsest.hermes import install as inst

REQUEST = inst.InstallRequest(
    server_url="http://127.0.0.1:8765",
    memory_id="hmem_team",
    secret="sec-123",
    mcp_command=("/usr/bin/pal", "mcp", "--data-dir", "/d", "--credential-file", "/c"),
    member_id="mem_1",
    credential_id="cred_1",
)


def _config(home: Path, value: dict[str, object]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(value))


def _read(home: Path) -> dict[str, object]:
    loaded = yaml.safe_load((home / "config.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_install_writes_plugin_connection_credential_skill_and_config(tmp_path: Path) -> None:
    home = tmp_path / "hermes"
    _config(
        home,
        {
            "model": "x",
            "memory": {"provider": "honcho", "memory_enabled": True},
            "mcp_servers": {"other": {"command": "o"}},
        },
    )
    report = inst.install(home, REQUEST)
    paths = inst.Paths(home)
    for name in inst.PLUGIN_FILES:
        assert (paths.plugin_dir / name).read_bytes() == (
            Path(inst.__file__).parent / name
        ).read_bytes()
    assert not (paths.plugin_dir / "install.py").exists()  # the installer is not copied
    connection = json.loads((paths.plugin_dir / "connection.json").read_text())
    assert connection == {
        "version": 1,
        "server_url": "http://127.0.0.1:8765",
        "credential_file": str(paths.credential),
        "memory_id": "hmem_team",
    }
    assert paths.credential.read_text() == "sec-123\n"
    assert stat.S_IMODE(paths.credential.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.journal.stat().st_mode) == 0o600
    assert "untrusted data" in paths.skill.read_text()
    config = _read(home)
    assert config["model"] == "x"
    assert config["memory"] == {"provider": "palimpsest", "memory_enabled": True}
    assert config["mcp_servers"] == {
        "other": {"command": "o"},
        "palimpsest": {
            "command": "/usr/bin/pal",
            "args": ["mcp", "--data-dir", "/d", "--credential-file", "/c"],
        },
    }
    assert "sec-123" not in (home / "config.yaml").read_text()
    assert str(paths.credential) in report.written


def test_uninstall_restores_previous_values_and_removes_files(tmp_path: Path) -> None:
    home = tmp_path / "hermes"
    original = {"memory": {"provider": "honcho"}, "mcp_servers": {"other": {"command": "o"}}}
    _config(home, original)
    inst.install(home, REQUEST)
    report = inst.uninstall(home)
    assert _read(home) == original
    assert sorted(report.restored) == ["mcp_servers.palimpsest", "memory.provider"]
    assert report.kept == []
    assert not inst.Paths(home).plugin_dir.exists()
    assert not inst.Paths(home).skill.exists()
    assert not inst.Paths(home).credential.exists()
    assert not inst.Paths(home).journal.exists()
    assert report.credential_id == "cred_1"


def test_uninstall_removes_keys_that_were_absent(tmp_path: Path) -> None:
    home = tmp_path / "fresh"  # no config.yaml at all
    inst.install(home, REQUEST)
    inst.uninstall(home)
    assert _read(home) == {}


def test_uninstall_leaves_what_was_changed_since(tmp_path: Path) -> None:
    home = tmp_path / "hermes"
    _config(home, {"memory": {"provider": "honcho"}})
    inst.install(home, REQUEST)
    config = _read(home)
    config["memory"] = {"provider": "mem0"}  # the user switched provider meanwhile
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    skill = inst.Paths(home).skill
    skill.write_text(skill.read_text() + "\nmy own note\n")
    report = inst.uninstall(home)
    after = _read(home)
    assert after["memory"] == {"provider": "mem0"}  # not restored to honcho
    assert "mcp_servers" not in after  # unchanged since install: restored (was absent)
    assert "memory.provider" in report.kept
    assert str(skill) in report.kept and skill.exists()
    assert not (inst.Paths(home).plugin_dir / "provider.py").exists()


def test_install_refuses_twice_and_over_a_foreign_plugin(tmp_path: Path) -> None:
    home = tmp_path / "hermes"
    inst.install(home, REQUEST)
    with pytest.raises(Conflict, match="already installed"):
        inst.install(home, REQUEST)
    other = tmp_path / "other"
    (other / "plugins" / "palimpsest").mkdir(parents=True)
    with pytest.raises(Conflict, match="not installed by pal"):
        inst.preflight(other)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.yaml").write_text("memory: [unclosed\n")
    with pytest.raises(InvalidInput, match=r"cannot read .*config\.yaml"):
        inst.preflight(bad)
    assert not (bad / "plugins").exists()


def test_uninstall_without_install_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not installed"):
        inst.uninstall(tmp_path)
