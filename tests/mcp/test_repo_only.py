"""`pal mcp` modes: inside a Git repository with no service configured it serves the
repository tools alone and says so; with a service configured it serves both; a configured
service that fails is an error, never a silent repository-only start; with neither there is
nothing to serve. The `--json` of `pal` and the serve options stand where they do elsewhere."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from mcp import Client, StdioServerParameters
from palimpsest.identity import export_document, identity_from_seed
from tests.hn.recall_helpers import new_repo, remember

from .world import PAL, READ_TOOLS, World, build_world, child_env

ALICE = identity_from_seed("Alice Agent", bytes(range(32)))
REPO_READ = ["repo_memory_recall", "repo_memory_grep", "repo_memory_show", "repo_memory_prime"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    remember(new_repo(path, trusted=[ALICE]), ALICE, "a decision", kind="decision")
    document = tmp_path / "alice.json"
    document.write_bytes(export_document(ALICE))
    done = subprocess.run([PAL, "id", "--repo", str(path), "import", str(document)],
                          capture_output=True, env=child_env(), check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return path


def _start(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PAL, *args], cwd=cwd, capture_output=True, text=True, input="",
                          env=child_env(**env), check=False, timeout=120)


def test_repository_only_serves_the_repository_tools_and_says_so(repo: Path) -> None:
    async def run() -> None:
        params = StdioServerParameters(command=PAL, args=["mcp"], env=child_env(), cwd=str(repo))
        async with Client(params) as client:
            assert client.instructions is not None
            assert client.instructions.startswith("Palimpsest repository memory only")
            assert "no memory service is configured" in client.instructions
            assert "--allow-repo-writes" in client.instructions
            listed = (await client.list_tools()).tools
            assert [t.name for t in listed] == REPO_READ
            assert all(t.annotations and t.annotations.read_only_hint for t in listed)
            refused = await client.call_tool("repo_memory_record", {"request": {}})
            assert refused.is_error is True
            block = refused.content[0]
            assert isinstance(block, types.TextContent)
            assert "repository writes are off" in block.text
            assert "--allow-repo-writes" in block.text
            gone = await client.call_tool("memory_list", {})
            assert gone.is_error is True  # no service tool is callable either

    anyio.run(run)


def test_with_a_service_both_groups(repo: Path, tmp_path: Path) -> None:
    world: World = build_world(tmp_path / "svc", {"reader": ["read"]})

    async def run() -> None:
        params = StdioServerParameters(
            command=PAL, cwd=str(repo), env=child_env(),
            args=["mcp", "--data-dir", str(world.data_dir), "--credential-file",
                  str(world.agents["reader"].credential_file)])
        async with Client(params) as client:
            assert client.instructions is not None
            assert client.instructions.startswith("Palimpsest memory.")
            assert "repo_memory_prime" in client.instructions
            names = [t.name for t in (await client.list_tools()).tools]
            assert names[: len(READ_TOOLS)] == READ_TOOLS and names[-4:] == REPO_READ

    anyio.run(run)


def test_a_configured_service_that_fails_is_an_error_not_a_fallback(
    repo: Path, tmp_path: Path
) -> None:
    world = build_world(tmp_path / "svc", {"reader": ["read"]})
    bad = tmp_path / "bad.cred"
    bad.write_text("not-a-credential\n")
    os.chmod(bad, 0o600)
    cases = [
        (["mcp", "--data-dir", str(world.data_dir), "--credential-file", str(bad)], {}),
        (["mcp", "--data-dir", str(world.data_dir)], {"PAL_CREDENTIAL": "not-a-credential"}),
        (["mcp", "--data-dir", str(world.data_dir)], {}),  # a service without a credential
        (["mcp", "--credential-file", str(tmp_path / "missing.cred")], {}),
    ]
    for args, env in cases:
        done = _start(repo, *args, **env)
        assert done.returncode == 1, (args, done.stdout)
        assert done.stdout == ""  # no MCP session was started, repository-only or other
        assert done.stderr.startswith("pal: ") and done.stderr.count("\n") == 1
    assert "no credential" in _start(repo, "mcp", "--data-dir", str(world.data_dir)).stderr


def test_neither_a_repository_nor_a_service_is_nothing_to_serve(tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    done = _start(outside, "mcp")
    assert done.returncode == 1 and done.stdout == ""
    assert "nothing to serve" in done.stderr and "--credential-file" in done.stderr
    named = _start(outside, "mcp", "--repo", str(outside))  # asked for: must be a repository
    assert named.returncode == 1 and named.stdout == "" and named.stderr.startswith("pal: ")


def test_options_stand_where_they_do_on_every_command(repo: Path) -> None:
    # --json is pal's own (accepted anywhere after pal); `pal mcp --json` still parses
    for args in (["--json", "mcp", "--help"], ["mcp", "--json", "--help"]):
        done = _start(repo, *args)
        assert done.returncode == 0, done.stderr
        assert "--allow-repo-writes" in done.stdout and "install" in done.stdout
    # --memory needs the service it names a memory of
    done = _start(repo, "mcp", "--memory", "hmem_x")
    assert done.returncode == 1 and "--memory needs a memory service" in done.stderr
