"""Selection file format, validation and persistence (hn-memory-v0.md §20.1, §24 item 19)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from palimpsest.errors import InvalidInput
from palimpsest.hn.replication.selection import (
    Budgets,
    build_selection,
    decode_selection,
    load_selection,
    save_selection,
    selection_file_name,
    validate_remote,
)
from tests.replication.helpers import ALICE, ALICE_STREAM, BOB_STREAM, git, pal

EXPECTED_MEMORY_SELECTION = (
    "{\n"
    '  "version": 1,\n'
    '  "remote": "origin",\n'
    '  "actors": null,\n'
    '  "proposals": null,\n'
    '  "memories": [\n'
    f'    "{BOB_STREAM}",\n'
    f'    "{ALICE_STREAM}"\n'
    "  ],\n"
    '  "all": false,\n'
    '  "budgets": {\n'
    '    "maxEvents": 10000,\n'
    '    "maxObjects": 100000,\n'
    '    "maxObjectBytes": 67108864,\n'
    '    "maxAttachmentBytes": 16777216,\n'
    '    "maxTotalBytes": 1073741824\n'
    "  }\n"
    "}\n"
).encode()


def test_memory_selection_exact_bytes_sorted_and_null_actors() -> None:
    selection = build_selection("origin", memories=[ALICE_STREAM, BOB_STREAM])
    assert selection.encode() == EXPECTED_MEMORY_SELECTION


def test_all_selection_omits_memories_and_keeps_budgets() -> None:
    selection = build_selection("up", all_streams=True, budgets=Budgets(max_events=3))
    doc = selection.to_json()
    assert list(doc) == ["version", "remote", "actors", "proposals", "all", "budgets"]
    assert doc["all"] is True and doc["actors"] is None
    assert doc["budgets"]["maxEvents"] == 3


@pytest.mark.parametrize(
    ("remote", "name"),
    [("origin", "b3JpZ2lu.json"), ("ab", "YWI.json"), ("a.b-c_d", "YS5iLWNfZA.json")],
)
def test_file_name_is_base64url_without_padding(remote: str, name: str) -> None:
    assert selection_file_name(remote) == name


@pytest.mark.parametrize(
    "remote",
    ["", ".hidden", "a..b", "trail.", "x.lock", "a/b", "a b", "a\n", "é", "r" * 129, "@{1}"],
)
def test_hostile_remote_names_refused(remote: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_remote(remote)
    assert info.value.code == "invalid-remote"


@pytest.mark.parametrize(
    "stream",
    [
        "sha256:" + "a" * 63,  # short
        "sha256:" + "A" * 64,  # upper case
        ALICE_STREAM + " ",  # trailing space
        ALICE_STREAM.removeprefix("sha256:"),  # no prefix
        "sha1:" + "a" * 64,
    ],
)
def test_bad_memory_selectors_refused(stream: str) -> None:
    with pytest.raises(InvalidInput) as info:
        build_selection("origin", memories=[stream])
    assert info.value.code == "invalid-selector"


def test_duplicate_selector_and_all_with_exact_refused() -> None:
    with pytest.raises(InvalidInput, match="duplicate"):
        build_selection("origin", memories=[ALICE_STREAM, ALICE_STREAM])
    with pytest.raises(InvalidInput, match="--all cannot be combined"):
        build_selection("origin", memories=[ALICE_STREAM], all_streams=True)
    with pytest.raises(InvalidInput, match="at least one selector"):
        build_selection("origin")
    with pytest.raises(InvalidInput, match="positive"):
        Budgets(max_objects=0)


def test_legacy_selection_without_memories_loads() -> None:
    legacy = (
        b'{\n  "version": 1,\n  "remote": "origin",\n  "actors": ["' + ALICE.encode()
        + b'"],\n  "proposals": null,\n  "all": false,\n  "budgets": {"maxEvents": 5}\n}\n'
    )
    selection = decode_selection(legacy, remote="origin")
    assert selection.actors == (ALICE,)
    assert selection.memories == ()
    assert selection.budgets.max_events == 5
    assert selection.budgets.max_objects == Budgets().max_objects


@pytest.mark.parametrize(
    "doc",
    [
        b'{"version": 2, "remote": "origin", "all": true, "budgets": {}}',
        b'{"version": 1, "remote": "other", "all": true, "budgets": {}}',
        b'{"version": 1, "remote": "origin", "all": true, "budgets": {}, "extra": 1}',
        b'{"version": 1, "remote": "origin", "all": "yes", "budgets": {}}',
        b'{"version": 1, "remote": "origin", "all": true, "all": true, "budgets": {}}',
        b'{"version": 1, "remote": "origin", "all": true, "budgets": {"maxEvents": -1}}',
    ],
)
def test_malformed_selection_files_refused(doc: bytes) -> None:
    with pytest.raises(InvalidInput):
        decode_selection(doc, remote="origin")


@pytest.mark.parametrize("value", [2**63, 10**20 - 1])
def test_19_budget_beyond_go_int64_refused(value: int) -> None:
    # Found by the selection fuzz target: 20-digit budgets were accepted and written back,
    # and upstream cannot read such a file (its budgets are Go ints).
    doc = b'{"version": 1, "remote": "origin", "all": true, "budgets": {"maxEvents": %d}}' % value
    with pytest.raises(InvalidInput) as caught:
        decode_selection(doc, remote="origin")
    assert caught.value.code == "invalid-budget"
    assert decode_selection(doc.replace(b"%d" % value, b"%d" % (2**63 - 1)), remote="origin")


def test_save_and_load_round_trip_with_private_modes(tmp_path: Path) -> None:
    git_dir = tmp_path / "git"
    selection = build_selection("origin", memories=[ALICE_STREAM])
    path = save_selection(git_dir, selection)
    assert path.read_bytes() == selection.encode()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_selection(git_dir, "origin") == selection
    implicit = load_selection(git_dir, "elsewhere")
    assert implicit.all and implicit.implicit


def test_cli_select_then_show(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git("init", "-q", str(repo))
    done = pal("replication", "select", "origin", "--memory", ALICE_STREAM, "--max-events",
               "7", cwd=repo)  # fmt: skip
    assert done.returncode == 0, done.stderr
    saved = repo / ".git/hn/replication/selections/b3JpZ2lu.json"
    assert saved.read_bytes() == build_selection(
        "origin", memories=[ALICE_STREAM], budgets=Budgets(max_events=7)
    ).encode()
    shown = pal("replication", "show", "--json", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert '"saved":true' in shown.stdout and ALICE_STREAM in shown.stdout
    bad = pal("replication", "select", "origin", "--all", "--memory", ALICE_STREAM, cwd=repo)
    assert bad.returncode == 1
    assert bad.stderr.startswith("pal: ") and bad.stderr.count("\n") == 1
    assert saved.read_bytes().count(b"maxEvents\": 7") == 1  # refused call changed nothing


@pytest.mark.parametrize("where", ["top", "budgets"])
def test_19_unknown_field_named_inertly(where: str) -> None:
    # Found by the selection fuzz target: the unknown key was echoed raw (DEL, ESC, newlines).
    key = '"versi\\u001b[2J\\u007fn\\n' + "x" * 200 + '"'
    base = '"version": 1, "remote": "origin", "all": true'
    doc = (
        "{" + base + ', "budgets": {' + key + ": 1}}"
        if where == "budgets"
        else "{" + key + ": 1, " + base + ', "budgets": {}}'
    )
    with pytest.raises(InvalidInput) as caught:
        decode_selection(doc.encode(), remote="origin")
    assert caught.value.code == "bad-selection"
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in caught.value.message)
    assert len(caught.value.message) < 120
