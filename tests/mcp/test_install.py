"""`pal mcp install|uninstall --client claude-code|cursor`, on temporary files in a real
repository: the entry is written idempotently next to whatever the file holds, an entry pal did
not write is never overwritten, `--print` writes nothing, uninstall gives back the file as it
was (the same bytes when nothing else changed) and leaves an entry changed since alone; the
installed entry starts a working `pal mcp` for that repository with the official MCP client."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp import Client, StdioServerParameters
from palimpsest.errors import Conflict, InvalidInput
from palimpsest.mcp import clients
from tests.hn.recall_helpers import new_repo

from .world import PAL, child_env

ENTRY = clients.server_entry("/usr/bin/pal", ["mcp", "--repo", "/r"])
OTHER = clients.server_entry("/usr/bin/pal", ["mcp", "--repo", "/r", "--allow-repo-writes"])
PATH = Path("/r/.mcp.json")


def test_install_plans_keep_everything_else() -> None:
    mine = {"z": 1, "mcpServers": {"other": {"command": "x"}}, "a": [1]}
    first = clients.plan_install(mine, None, path=PATH, name="palimpsest-repo", entry=ENTRY,
                                 original=json.dumps(mine))
    assert first.action == "created" and first.document is not None
    assert list(first.document) == ["z", "mcpServers", "a"]  # key order kept
    assert first.document["mcpServers"] == {"other": {"command": "x"}, "palimpsest-repo": ENTRY}
    assert mine["mcpServers"] == {"other": {"command": "x"}}  # the input is not modified
    again = clients.plan_install(first.document, first.journal, path=PATH,
                                 name="palimpsest-repo", entry=ENTRY)
    assert again.action == "unchanged" and again.document == first.document
    flags = clients.plan_install(first.document, first.journal, path=PATH,
                                 name="palimpsest-repo", entry=OTHER)
    assert flags.action == "updated" and flags.document is not None
    assert flags.document["mcpServers"]["palimpsest-repo"] == OTHER
    assert flags.journal is not None and flags.journal["original"] == json.dumps(mine)
    with pytest.raises(Conflict, match="did not write"):  # someone else's entry of that name
        clients.plan_install({"mcpServers": {"palimpsest-repo": {"command": "theirs"}}}, None,
                             path=PATH, name="palimpsest-repo", entry=ENTRY)
    with pytest.raises(InvalidInput, match="mcpServers is not an object"):
        clients.plan_install({"mcpServers": []}, None, path=PATH, name="n", entry=ENTRY)


def test_uninstall_plans_restore_or_leave_alone() -> None:
    mine = {"mcpServers": {"other": {"command": "x"}}}
    text = '{"mcpServers":{"other":{"command":"x"}}}'
    made = clients.plan_install(mine, None, path=PATH, name="p", entry=ENTRY, original=text)
    undone = clients.plan_uninstall(made.document, made.journal, path=PATH)
    assert undone.action == "restored" and undone.document == mine
    assert undone.text == text.encode()  # nothing else changed: the very bytes
    assert undone.journal is None
    assert made.document is not None
    edited = {**made.document, "mcpServers": {**made.document["mcpServers"], "new": {}}}
    kept_edit = clients.plan_uninstall(edited, made.journal, path=PATH)
    assert kept_edit.document == {"mcpServers": {"other": {"command": "x"}, "new": {}}}
    assert kept_edit.text is None  # the person's other edit survives; re-rendered
    changed = {"mcpServers": {"other": {"command": "x"}, "p": {"command": "mine now"}}}
    left = clients.plan_uninstall(changed, made.journal, path=PATH)
    assert left.action == "kept" and left.document == changed
    fresh = clients.plan_install(None, None, path=PATH, name="p", entry=ENTRY)
    assert clients.plan_uninstall(fresh.document, fresh.journal, path=PATH).action == "removed"
    assert clients.plan_uninstall(mine, None, path=PATH).action == "absent"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    new_repo(path)
    return path.resolve()


def _pal(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PAL, *args], cwd=cwd, capture_output=True, text=True,
                          env=child_env(), check=False, timeout=120)


@pytest.mark.parametrize(("client", "relative"),
                         [("claude-code", ".mcp.json"), ("cursor", ".cursor/mcp.json")])
def test_install_and_uninstall_a_client_config(repo: Path, client: str, relative: str) -> None:
    config = repo / relative
    config.parent.mkdir(exist_ok=True)
    before = b'{"mcpServers": {"github": {"command": "gh-mcp"}}, "inputs": []}\n'
    config.write_bytes(before)

    shown = _pal(repo, "mcp", "install", "--client", client, "--print")
    assert shown.returncode == 0, shown.stderr
    assert config.read_bytes() == before  # --print writes nothing
    printed = json.loads(shown.stdout)
    entry = printed["mcpServers"]["palimpsest-repo"]
    assert entry["args"] == ["mcp", "--repo", str(repo)]
    assert printed["mcpServers"]["github"] == {"command": "gh-mcp"}
    assert not (repo / ".git" / "hn" / "mcp-clients" / f"{client}.json").exists()

    done = _pal(repo, "mcp", "install", "--client", client, "--allow-repo-writes", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["action"] == "created" and report["path"] == str(config)
    written = json.loads(config.read_text())
    assert list(written) == ["mcpServers", "inputs"]
    assert written["mcpServers"]["github"] == {"command": "gh-mcp"}
    assert written["mcpServers"]["palimpsest-repo"]["args"] == [
        "mcp", "--repo", str(repo), "--allow-repo-writes"]
    installed = config.read_bytes()
    journal = repo / ".git" / "hn" / "mcp-clients" / f"{client}.json"
    assert journal.stat().st_mode & 0o777 == 0o600

    again = _pal(repo / ".git", "mcp", "--json", "install", "--client", client,
                 "--allow-repo-writes")  # from inside the repository, options before
    assert json.loads(again.stdout)["action"] == "unchanged"
    assert config.read_bytes() == installed

    undone = _pal(repo, "mcp", "uninstall", "--client", client)
    assert undone.returncode == 0, undone.stderr
    assert config.read_bytes() == before  # as it was, byte for byte
    assert not journal.exists()
    assert "nothing to undo" in _pal(repo, "mcp", "uninstall", "--client", client).stdout


def test_a_foreign_entry_and_a_broken_file_are_refused_untouched(repo: Path) -> None:
    config = repo / ".mcp.json"
    theirs = b'{"mcpServers": {"palimpsest-repo": {"command": "theirs"}}}'
    config.write_bytes(theirs)
    done = _pal(repo, "mcp", "install", "--client", "claude-code")
    assert done.returncode == 1 and "did not write" in done.stderr and "--name" in done.stderr
    assert config.read_bytes() == theirs
    named = _pal(repo, "mcp", "install", "--client", "claude-code", "--name", "pal2", "--json")
    assert json.loads(named.stdout)["action"] == "created"
    assert json.loads(config.read_text())["mcpServers"]["palimpsest-repo"] == {
        "command": "theirs"}
    config.write_bytes(b"{not json")
    broken = _pal(repo, "mcp", "install", "--client", "claude-code", "--name", "pal3")
    assert broken.returncode == 1 and "not valid JSON" in broken.stderr
    assert config.read_bytes() == b"{not json"
    outside = _pal(repo.parent, "mcp", "install", "--client", "cursor")
    assert outside.returncode == 1 and outside.stderr.startswith("pal: ")


def test_uninstall_removes_what_it_created(repo: Path) -> None:
    assert _pal(repo, "mcp", "install", "--client", "cursor").returncode == 0
    assert (repo / ".cursor" / "mcp.json").exists()
    assert _pal(repo, "mcp", "uninstall", "--client", "cursor").returncode == 0
    assert not (repo / ".cursor").exists()  # the directory too: install had made it


def test_the_installed_entry_serves_this_repository(repo: Path, tmp_path: Path) -> None:
    assert _pal(repo, "mcp", "install", "--client", "claude-code",
                "--allow-repo-writes").returncode == 0
    entry: dict[str, Any] = json.loads((repo / ".mcp.json").read_text())["mcpServers"][
        "palimpsest-repo"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async def run() -> list[str]:
        # a client starting the entry from another directory still reaches this repository
        params = StdioServerParameters(command=entry["command"], args=entry["args"],
                                       env=child_env(), cwd=str(elsewhere))
        async with Client(params) as client:
            return [t.name for t in (await client.list_tools()).tools]

    names = anyio.run(run)
    assert names[:4] == ["repo_memory_recall", "repo_memory_grep", "repo_memory_show",
                         "repo_memory_prime"]
    assert "repo_memory_handoff" in names and "memory_list" not in names
    assert os.path.isabs(entry["command"])
