"""``pal``'s one rule for options, and ``pal admin``'s refusal of a directory without a store.

Rule (palimpsest.cli.options): ``--json`` is accepted by every command, anywhere after ``pal``;
a group's own options (``--data-dir``, ``--create``, ``--url``, ``--credential-file``) go before
or after its subcommands, with the same meaning.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from palimpsest.cli.main import COMMANDS, cli
from palimpsest.service.memories import MemoryService


def _walk(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...],
                                                                         click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _walk(sub, (*path, name))


def _tree() -> list[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(cli)
    out: list[tuple[tuple[str, ...], click.Command]] = []
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        out.extend(_walk(command, (name,)))
    return out


def _flags(command: click.Command) -> set[str]:
    return {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}


def test_every_command_takes_json_and_its_groups_options() -> None:
    tree = _tree()
    assert len(tree) > 60
    by_path = dict(tree)
    for path, command in tree:
        assert "--json" in _flags(command), path
        for depth in range(1, len(path)):  # every option of every group above it
            group = by_path[path[:depth]]
            missing = _flags(group) - _flags(command) - {"--help", "-h"}
            assert not missing, (path, missing)


def _run(*args: str) -> click.testing.Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    data_dir = tmp_path / "data"
    with MemoryService(data_dir) as svc:
        svc.bootstrap_owner()
        svc.create_member("dana", "agent")
    return data_dir


def test_data_dir_and_json_before_or_after_the_subcommand(store: Path) -> None:
    d = str(store)
    outputs = [
        _run("--json", "admin", "--data-dir", d, "member", "list"),
        _run("admin", "--json", "--data-dir", d, "member", "list"),
        _run("admin", "--data-dir", d, "member", "--json", "list"),
        _run("admin", "member", "list", "--data-dir", d, "--json"),
        _run("admin", "member", "list", "--json", f"--data-dir={d}"),
    ]
    assert all(r.exit_code == 0 for r in outputs), [r.output for r in outputs]
    assert len({r.output for r in outputs}) == 1
    assert {m["name"] for m in json.loads(outputs[0].output)} == {"owner", "dana"}
    human = _run("admin", "member", "list", "--data-dir", d)
    assert human.exit_code == 0 and "dana" in human.output and not human.output.startswith("[")


def test_the_data_dir_nearest_the_command_wins(store: Path, tmp_path: Path) -> None:
    result = _run("admin", "--data-dir", str(tmp_path / "elsewhere"), "member", "list",
                  "--data-dir", str(store), "--json")
    assert result.exit_code == 0, result.output
    assert "dana" in result.output


def test_a_directory_without_a_store_is_refused(tmp_path: Path) -> None:
    typo = tmp_path / "typo"
    result = CliRunner().invoke(cli, ["admin", "--data-dir", str(typo), "member", "create",
                                      "ops", "--admin"])
    assert result.exit_code != 0
    assert "holds no memory store" in str(result.exception)
    assert "--create" in str(result.exception)
    assert not typo.exists()  # nothing was created
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = CliRunner().invoke(cli, ["admin", "--data-dir", str(empty), "credential", "list"])
    assert refused.exit_code != 0 and list(empty.iterdir()) == []


def test_create_starts_a_store(tmp_path: Path) -> None:
    new = tmp_path / "new"
    made = _run("admin", "member", "create", "ops", "--admin", "--create", "--data-dir",
                str(new), "--json")
    assert made.exit_code == 0, made.output
    listed = _run("admin", "--data-dir", str(new), "member", "list", "--json")
    assert [m["id"] for m in json.loads(listed.output)] == [json.loads(made.output)["id"]]


def test_repository_memory_commands_follow_the_rule(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import pygit2

    pygit2.init_repository(str(tmp_path / "repo"))
    monkeypatch.chdir(tmp_path / "repo")
    assert _run("id", "init", "--name", "Ada").exit_code == 0
    outputs = [_run("--json", "id", "show"), _run("id", "--json", "show"),
               _run("id", "show", "--json")]
    assert all(r.exit_code == 0 for r in outputs)
    assert len({r.output for r in outputs}) == 1
    assert json.loads(outputs[0].output)["name"] == "Ada"


def test_repo_goes_before_or_after_the_subcommand(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import pygit2

    repo = tmp_path / "repo"
    pygit2.init_repository(str(repo))
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "init"],
                   check=True)
    monkeypatch.chdir(tmp_path)  # not inside the repository: --repo must say where
    assert _run("id", "--repo", str(repo), "init", "--name", "Ada").exit_code == 0
    before = _run("id", "--repo", str(repo), "show", "--json")
    after = _run("id", "show", "--repo", str(repo), "--json")
    assert before.exit_code == after.exit_code == 0
    assert before.output == after.output
    recalled = _run("memory", "recall", "--repo", str(repo), "--json")
    assert recalled.exit_code == 0, recalled.output
    assert json.loads(recalled.output)["memories"] == []
