"""The click-free warm ``pal memory recall`` (cli/fast.py) answers exactly as the click command
does — same stdout bytes, stderr and exit status — and hands every other form to click."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2
import pytest

from palimpsest.cli import app, fast
from palimpsest.cli.main import main
from palimpsest.identity import Identity
from tests.hn.recall_helpers import CAROL, new_repo, pal, remember

Cap = pytest.CaptureFixture[bytes]


@pytest.fixture
def repo(tmp_path: Path, alice: Identity, bob: Identity) -> pygit2.Repository:
    repo = new_repo(tmp_path / "repo", trusted=[alice, bob])
    for n in range(5):
        remember(repo, alice, f"alice note {n} stream isolation", topics=("arch",),
                 timestamp=f"2026-09-01T12:00:0{n}Z")  # fmt: skip
    remember(repo, bob, "bob decided", kind="decision", topics=("arch", "ops"))
    remember(repo, CAROL, "carol is not trusted", topics=("arch",))
    first = pal(repo.workdir, "recall", "--json")  # the Git path keeps the answers for HEAD
    assert first.returncode == 0, first.stderr
    return repo


def _outcome(capsys: Cap, call: Callable[[], Any]) -> tuple[int, bytes, bytes, Any]:
    capsys.readouterr()
    code, value = 0, None
    try:
        value = call()
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err, value


def _forms(where: str, cursor: str) -> list[list[str]]:
    tail = [
        ["recall", "--json"],
        ["recall"],
        ["--json", "recall", "--topic", "arch"],
        ["recall", "--topic=arch", "--kind", "decision", "--json"],
        ["recall", "--topic", "arch", "--topic", "ops", "--json"],
        ["recall", "--query", "stream isolation", "--max-records", "2"],
        ["recall", "--include-untrusted", "--lifecycle", "all", "--json"],
        ["recall", "--trust", "actor-untrusted", "--json"],
        ["recall", "--max-content-bytes=65536", "--max-records", "3", "--json"],
        ["recall", "--cursor", cursor, "--max-records", "2", "--json"],
        ["recall", "--at", "HEAD", "--path", "README.md"],
        ["recall", "--subject", "issue:sha256:" + "1" * 64, "--json"],
        ["recall", "--max-records", "0", "--json"],  # refused by the request rules
        ["recall", "--cursor", "not-a-cursor", "--json"],  # refused
        ["recall", "--lifecycle", "dormant", "--json"],  # refused
    ]
    return [["memory", "--repo", where, *t] for t in tail] + [
        ["memory", "recall", "--repo", where, "--json"],
        ["memory", "--repo", "/nonexistent", "recall", "--repo", where, "--json"],
    ]


def test_fast_forms_answer_as_the_click_command(
    repo: pygit2.Repository, capsysbinary: Cap, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = str(repo.workdir)
    click_run = app.run
    page = _outcome(capsysbinary, lambda: click_run(["memory", "--repo", where, "recall",
                                                      "--max-records", "2", "--json"]))  # fmt: skip
    cursor = json.loads(page[1])["nextCursor"]
    assert cursor

    def no_click(argv: Any = None) -> None:
        raise AssertionError(f"click ran for {argv}")

    refused = 0
    for argv in _forms(where, cursor):
        assert fast.parse(argv) is not None, argv
        slow = _outcome(capsysbinary, lambda a=argv: click_run(a))
        monkeypatch.setattr(app, "run", no_click)  # the entry point must answer without click
        quick = _outcome(capsysbinary, lambda a=argv: main(a))
        monkeypatch.setattr(app, "run", click_run)
        assert quick[:3] == slow[:3], argv
        assert slow[1] or slow[0] != 0, argv  # something was printed (or refused)
        refused += slow[0] != 0
    assert refused == 3


@pytest.mark.parametrize("tail", [
    ["recall", "--help"], ["recall", "-h"], ["recall", "--input", "-"], ["recall", "--topic", "-x"],
    ["recall", "--max-records", "+1"], ["recall", "--max-records", "1_0"], ["recall", "extra"],
    ["recall", "--topic"], ["recall", "--subject="], ["recall", "-i"], ["grep", "x"],
    ["record", "--content", "x"], ["--topic", "t", "recall"], ["recall", "recall"],
    ["recall", "--json=1"], ["recall", "--", "--json"], ["index", "rebuild"],
])  # fmt: skip
def test_other_forms_go_to_click(tail: list[str]) -> None:
    assert fast.parse(["memory", *tail]) is None
    assert fast.parse(["--json", "memory", *tail]) is None
    assert fast.run(["memory", "--repo", "/nonexistent", *tail]) is False


def test_a_repository_that_is_a_file_goes_to_click(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert fast.parse(["memory", "--repo", str(tmp_path / "file"), "recall"]) is None


def test_what_the_index_does_not_keep_goes_to_click(repo: pygit2.Repository, capsysbinary: Cap,
                                                    alice: Identity) -> None:  # fmt: skip
    remember(repo, alice, "a new note moves a memory ref")
    argv = ["memory", "--repo", str(repo.workdir), "recall", "--json"]
    assert _outcome(capsysbinary, lambda: fast.run(argv))[:4] == (0, b"", b"", False)


def test_the_warm_process_imports_neither_click_nor_typing(repo: pygit2.Repository) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    again = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "palimpsest.cli.main", "memory", "--repo",
         str(repo.workdir), "recall", "--json"],
        capture_output=True, env=env, check=False, timeout=120,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in again.stderr.decode().splitlines()}
    assert "palimpsest.hn.recall.warm" in imported and "palimpsest.cli.fast" in imported
    assert not {m for m in imported if m.split(".")[0] in ("click", "typing", "pygit2")}
