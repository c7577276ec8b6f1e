"""`pal hermes` refusals: one `pal: <reason>` line, exit 1, nothing half-installed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.mcp.world import PAL, build_world


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PAL, "hermes", *args], capture_output=True, text=True, timeout=120, check=False
    )


def _refused(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("pal: ") and done.stderr.count("\n") == 1
    return done.stderr


def test_uninstall_when_not_installed(tmp_path: Path) -> None:
    assert "not installed" in _refused(_run("uninstall", "--hermes-home", str(tmp_path)))


def test_install_refuses_a_remote_plain_http_server(tmp_path: Path) -> None:
    message = _refused(
        _run(
            "install",
            "--memory",
            "hmem_x",
            "--hermes-home",
            str(tmp_path),
            "--data-dir",
            str(tmp_path / "data"),
            "--server-url",
            "http://memory.example.org",
        )
    )
    assert "--server-url" in message and "https" in message
    assert not (tmp_path / "plugins").exists() and not (tmp_path / "data").exists()


def test_failed_install_revokes_the_new_credential(tmp_path: Path) -> None:
    world = build_world(tmp_path, {})
    home = tmp_path / "hermes"
    _refused(
        _run(
            "install",
            "--memory",
            "hmem_does_not_exist",
            "--hermes-home",
            str(home),
            "--data-dir",
            str(world.data_dir),
        )
    )
    assert not (home / "plugins").exists()
    assert not (home / ".palimpsest" / "install-journal.json").exists()
    with world.service() as svc:
        agents = [m for m in svc.list_members() if m.type == "agent"]
        credentials = [c for a in agents for c in svc.list_credentials(a.id)]
    assert credentials and all(c.revoked for c in credentials)


def test_install_refuses_delete_grant(tmp_path: Path) -> None:
    done = _run(
        "install", "--memory", "hmem_x", "--grant", "delete", "--hermes-home", str(tmp_path)
    )
    assert done.returncode == 1 and "delete" in done.stderr
