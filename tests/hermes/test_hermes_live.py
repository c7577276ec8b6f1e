"""The real hermes-agent 0.19.0 loads our provider from $HERMES_HOME/plugins/ (put there by the
real `pal hermes install`) and runs it against the live `pal serve`.

hermes-agent lives in an isolated virtual environment kept out of the project's own dependencies,
made once by the set-up step (`make setup` → `.venv-hermes/`, or `$PAL_HERMES_VENV`), so the test
needs no network. The driver (hermes_driver.py) runs inside that environment, where palimpsest
is NOT installed: the plugin can only work because it uses the standard library alone.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from mcp import Client, StdioServerParameters
from palimpsest.hermes import render
from tests.conftest import REPO_ROOT
from tests.mcp.live import pal_serve
from tests.mcp.world import HOSTILE, PAL, World, build_world

HERMES_VERSION = "0.19.0"
HERMES_VENV = Path(os.environ.get("PAL_HERMES_VENV") or REPO_ROOT / ".venv-hermes")
DRIVER = Path(__file__).with_name("hermes_driver.py")


def hermes_python() -> Path:
    """The isolated environment's python with hermes-agent 0.19.0 (made by `make setup`)."""
    python = HERMES_VENV / "bin" / "python"
    if not (HERMES_VENV / ".installed").exists() or not python.exists():
        pytest.fail(f"hermes-agent {HERMES_VERSION} is not installed at {HERMES_VENV}: run "
                    "`make .venv-hermes/.installed` (part of `make setup`) or set "
                    "PAL_HERMES_VENV", pytrace=False)
    probe = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                            "print(m.version('hermes-agent'))"],
                           capture_output=True, text=True, check=False)
    assert probe.stdout.strip() == HERMES_VERSION, probe.stderr
    return python


def _drive(python: Path, home: Path, plan: dict[str, Any]) -> dict[str, Any]:
    env = {
        "HERMES_HOME": str(home),
        "HOME": str(home.parent),
        "PATH": os.environ["PATH"],
        "PYTHONDONTWRITEBYTECODE": "1",
        # The first-turn recall waits 0.3 s by default; this shared test machine may be
        # slower than that, and what is tested is the behaviour, not the latency.
        "PALIMPSEST_HERMES_PREFETCH_WAIT": "5",
    }
    done = subprocess.run(
        [str(python), str(DRIVER)],
        input=json.dumps(plan),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]  # no exception escaped into Hermes
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _ids(text: str) -> set[str]:
    return {part.split('"', 1)[0] for part in text.split('<palimpsest-record id="')[1:]}


def _turn(warm: str, ask: str) -> dict[str, str]:
    return {"warm": warm, "ask": ask}


def _pal(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [PAL, *args, "--json"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    value: dict[str, Any] = json.loads(done.stdout)
    return value


def _mcp_tools(server: dict[str, Any], cwd: Path) -> list[str]:
    """Start the MCP server exactly as Hermes' config registers it and list its tools.

    ``cwd`` is outside any Git repository: inside one, ``pal mcp`` also offers the repo-memory
    tools, which this test does not exercise."""
    params = StdioServerParameters(command=server["command"], args=server["args"],
                                   env={"HOME": os.environ["HOME"], "PATH": os.environ["PATH"]},
                                   cwd=cwd)

    async def run() -> list[str]:
        async with Client(params) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    return anyio.run(run)


def _remember(world: World, text: str) -> str:
    with world.service() as svc:
        owner = svc.authenticate(world.owner_secret)
        return str(svc.remember(owner, world.memory_id, {"type": "fact", "content": text})["id"])


@pytest.mark.slow
def test_hermes_0_19_0_runs_our_provider_against_pal_serve(tmp_path: Path) -> None:
    python = hermes_python()
    world = build_world(tmp_path, {})
    home = tmp_path / "hermes-home"
    home.mkdir()
    (home / "config.yaml").write_text("model: test-model\nmemory:\n  provider: ''\n")
    with pal_serve(world.data_dir) as url:
        installed = _pal(
            "hermes",
            "install",
            "--memory",
            world.memory_id,
            "--hermes-home",
            str(home),
            "--data-dir",
            str(world.data_dir),
            "--server-url",
            url,
        )
        assert installed["member_id"] and installed["credential_id"]
        assert "restart" in installed["restart"].lower()
        config = yaml.safe_load((home / "config.yaml").read_text())
        assert config["memory"]["provider"] == "palimpsest"
        assert _mcp_tools(config["mcp_servers"]["palimpsest"], tmp_path) == [
            "memory_list", "memory_recall", "memory_graph", "memory_get", "memory_run_query",
            "memory_status", "memory_ref_list", "memory_log", "memory_show", "memory_diff",
            "memory_context_at"]  # the registered server runs, as the read-only agent

        first = _drive(
            python,
            home,
            {
                "session": "s1",
                "search": "Acme",
                "turns": [
                    _turn("What do we know about Acme?", "Tell me about Acme"),
                    _turn("Acme renewal?", "Acme again please"),
                ],
            },
        )
        assert first["active"] == "palimpsest"
        assert first["discovered"][0][0] == "palimpsest" and first["discovered"][0][2] is True
        assert first["is_memory_provider"] is True
        assert first["module"] == "_hermes_user_memory.palimpsest.provider"
        assert first["tools"] == ["palimpsest_search"]
        both = {world.records["plain"], world.records["hostile"]}
        text = first["turns"][0]["text"]
        assert _ids(text) == both
        assert "<memory-context>" not in text  # Hermes wraps; we never pre-wrap
        assert HOSTILE not in text and "&lt;system&gt;" in text  # escaped, still readable
        assert first["turns"][1]["text"] == ""  # de-duplicated across turns
        assert first["turns"][0]["status"] is None  # 0.19.0 has no RecallStatus: no crash
        found = {r["record_id"]: r for r in first["search"]["results"]}
        assert set(found) == both  # the explicit tool is not de-duplicated
        assert found[world.records["hostile"]]["content"] == render.escape(HOSTILE)  # as prefetch
        assert "<system>" not in json.dumps(first["search"], ensure_ascii=False)
        assert found[world.records["hostile"]]["written_by"].startswith("member:")
        assert first["available"] is True

        # A new session's first turn (nothing queued before it) gets memory for its own
        # question; the next turn consumes what was warmed after the first one.
        fresh = _drive(python, home, {"session": "s-first", "turns": [
            {"ask": "What do we know about Acme?"},
            _turn("Acme renewal?", "something about zebras and giraffes")]})
        assert _ids(fresh["turns"][0]["text"]) == both
        assert fresh["turns"][1]["text"] == ""  # warmed for "Acme renewal?": all seen already

        newer = _remember(world, "Acme opens an office in Oslo")
        restarted = _drive(
            python, home, {"session": "s1", "turns": [_turn("Acme news?", "Anything new on Acme?")]}
        )
        assert _ids(restarted["turns"][0]["text"]) == {newer}  # survives the restart
        warmed = _drive(python, home, {"session": "s-first", "turns": [
            _turn("the Oslo office", "something about zebras and giraffes")]})
        assert _ids(warmed["turns"][0]["text"]) == {newer}  # the warmed result, not the ask
        other = _drive(
            python, home, {"session": "s2", "turns": [_turn("Acme?", "Acme, from the start")]}
        )
        assert _ids(other["turns"][0]["text"]) == {*both, newer}  # sessions are separate
        reset = _drive(
            python,
            home,
            {
                "session": "s1",
                "turns": [
                    _turn(
                        "Acme?",
                        "Acme once more",
                    )
                    | {"reset": "yes"},
                    _turn("Acme?", "Acme after reset"),
                ],
            },
        )
        assert reset["turns"][0]["text"] == ""
        assert _ids(reset["turns"][1]["text"]) == {*both, newer}  # reset cleared s1's set

        with world.service() as svc:
            owner = svc.authenticate(world.owner_secret)
            listed = svc.list_records(owner, world.memory_id, limit=200)
        assert len(listed["data"]) == 3  # read-only: sync_turn wrote nothing back

    stopped = _drive(
        python,
        home,
        {
            "session": "s3",
            "search": "Acme",
            "turns": [_turn("Acme?", "Acme while the server is down")],
        },
    )
    assert stopped["turns"][0]["text"] == ""
    assert "error" in stopped["search"]

    with pal_serve(world.data_dir):
        (home / ".palimpsest" / "agent-credential").unlink()
        missing = _drive(
            python, home, {"session": "s4", "turns": [_turn("Acme?", "Acme without a credential")]}
        )
        assert missing["turns"][0]["text"] == ""
        assert missing["available"] is False  # is_available() tells the truth

    removed = _pal(
        "hermes", "uninstall", "--hermes-home", str(home), "--data-dir", str(world.data_dir)
    )
    assert sorted(removed["restored"]) == ["mcp_servers.palimpsest", "memory.provider"]
    assert yaml.safe_load((home / "config.yaml").read_text()) == {
        "model": "test-model",
        "memory": {"provider": ""},
    }
    assert not (home / "plugins" / "palimpsest").exists()
    with world.service() as svc:
        revoked = [c for c in svc.list_credentials() if c.id == installed["credential_id"]]
    assert revoked and revoked[0].revoked
