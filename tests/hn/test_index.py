"""The private index: file safety, tamper detection, incremental updates, verify (§19, D17)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pygit2
import pytest

from palimpsest.errors import Conflict, InvalidInput, NotFound, Unavailable
from palimpsest.hn import store
from palimpsest.hn.index import FORMAT, INDEX_NAME, KEY_NAME, open_index, verify_index
from palimpsest.hn.index import core as index_core
from palimpsest.hn.index import update as index_module
from palimpsest.hn.recall import recall
from palimpsest.hn.recall.request import normalize_request
from palimpsest.hn.recall.run import GitJudge
from palimpsest.identity import Identity
from tests.conftest import INTEROP
from tests.hn.recall_helpers import head, lifecycle, new_repo, remember

FIXTURE_SOURCE = "sha256:9bf830e40d6eea939ffd7396044b82e389d99cc1caf12346d8b05d35e21ce667"


def _dir(repo: pygit2.Repository) -> Path:
    return Path(repo.path) / "hn" / "memory"


def _recall_ids(repo: pygit2.Repository, **flags: Any) -> list[str]:
    result = recall(repo, normalize_request(at_commit=head(repo), **flags))
    return [json.loads(r)["id"] for r in result.records]


def _open(repo: pygit2.Repository, **kw: Any) -> Any:
    return open_index(repo, **kw)


@pytest.fixture
def repo(tmp_path: Path, alice: Identity) -> pygit2.Repository:
    repo = new_repo(tmp_path / "repo", trusted=[alice])
    remember(repo, alice, "first", timestamp="2026-09-01T12:00:01Z")
    remember(repo, alice, "second", timestamp="2026-09-01T12:00:02Z")
    return repo


def test_fixture_source_fingerprint(fixture_repo: Path) -> None:
    repo = store.open_repository(fixture_repo)
    with _open(repo) as index:
        assert index.state.fingerprint(GitJudge(repo).policy(head(repo)).digest) == FIXTURE_SOURCE
        assert index.state.records == 7
    assert json.loads((INTEROP / "index-v0.json").read_bytes())["sourceFingerprint"] == (
        FIXTURE_SOURCE
    )


def test_modes_and_layout(repo: pygit2.Repository) -> None:
    _open(repo).close()
    base = Path(repo.path) / "hn"
    for directory in (base, base / "memory"):
        assert stat.S_IMODE(os.lstat(directory).st_mode) == 0o700
    for name in (INDEX_NAME, KEY_NAME):
        assert stat.S_IMODE(os.lstat(base / "memory" / name).st_mode) == 0o600
    names = set(os.listdir(base / "memory"))
    assert {INDEX_NAME, KEY_NAME} <= names <= {INDEX_NAME, KEY_NAME, *SIDE}
    for name in names - {INDEX_NAME, KEY_NAME}:  # SQLite's WAL files inherit the 0600 mode
        assert stat.S_IMODE(os.lstat(base / "memory" / name).st_mode) == 0o600


SIDE = (INDEX_NAME + "-wal", INDEX_NAME + "-shm")


def test_symlinked_index_file_is_refused(repo: pygit2.Repository, tmp_path: Path) -> None:
    _open(repo).close()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    path = _dir(repo) / INDEX_NAME
    path.unlink()
    path.symlink_to(victim)
    with pytest.raises(Unavailable) as info:
        _open(repo)
    assert info.value.code == "index-unsafe"
    assert victim.read_bytes() == b"precious"


def test_symlinked_index_directory_is_refused(repo: pygit2.Repository, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (Path(repo.path) / "hn").mkdir(mode=0o700)
    (Path(repo.path) / "hn" / "memory").symlink_to(elsewhere)
    with pytest.raises(Unavailable, match="symlink"):
        _open(repo)
    assert list(elsewhere.iterdir()) == []


def test_group_writable_directory_is_refused(repo: pygit2.Repository) -> None:
    _open(repo).close()
    os.chmod(_dir(repo), 0o770)  # noqa: S103 - the attack under test
    with pytest.raises(Unavailable, match="writable by other users"):
        _open(repo)


@pytest.mark.parametrize("attack", ["hardlink", "mode-0644", "directory"])
def test_unsafe_index_file_is_refused(repo: pygit2.Repository, tmp_path: Path, attack: str) -> None:
    _open(repo).close()
    path = _dir(repo) / INDEX_NAME
    if attack == "hardlink":
        os.link(path, tmp_path / "second-name")
    elif attack == "mode-0644":
        os.chmod(path, 0o644)
    else:
        path.unlink()
        path.mkdir()
    with pytest.raises(Unavailable) as info:
        _open(repo)
    assert info.value.code == "index-unsafe"


def test_loose_key_file_is_refused(repo: pygit2.Repository) -> None:
    _open(repo).close()
    os.chmod(_dir(repo) / KEY_NAME, 0o644)
    with pytest.raises(Unavailable, match="0600"):
        _open(repo)


def _tamper(repo: pygit2.Repository, *statements: str) -> None:
    conn = sqlite3.connect(_dir(repo) / INDEX_NAME)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    "statements",
    [
        ["UPDATE rows SET tail = CAST(replace(CAST(tail AS TEXT), 'first', 'FORGED') AS BLOB)"],
        ["UPDATE rows SET lifecycle = 'active', lifecycle_rank = 0, evidence = 'resolved'"],
        ["DELETE FROM rows WHERE CAST(tail AS TEXT) LIKE '%second%'"],
        ["CREATE TRIGGER evil AFTER INSERT ON rows BEGIN SELECT 1; END"],
        ["UPDATE groups SET n = n + 100, max_content = 1"],
        ["CREATE VIEW v AS SELECT 1"],
        ["UPDATE meta SET value = 'pal-hn-memory-index/999' WHERE key = 'format'"],
        [
            "INSERT INTO rows SELECT 'sha256:' || hex(randomblob(32)), actor, kind, lifecycle,"
            " lifecycle_rank, base, evidence, '9999', mode, anchor, anchor_subject,"
            " content_bytes, data_bytes, search_units, head, tail, deps, fields, mac"
            " FROM rows LIMIT 1"
        ],
        ["UPDATE anchors SET n_desc = n_desc + 1"],
        ["UPDATE reach SET bits = X'00'"],
    ],
    ids=[
        "forged-json",
        "forged-columns",
        "deleted-row",
        "trigger",
        "forged-totals",
        "view",
        "version",
        "extra-row",
        "forged-anchor",
        "forged-reach",
    ],
)
def test_tampered_index_is_detected_and_rebuilt(
    repo: pygit2.Repository, alice: Identity, statements: list[str]
) -> None:
    bob_like = remember(repo, alice, "third", timestamp="2026-09-01T12:00:03Z")
    lifecycle(repo, alice, "retract", bob_like.memory_id, timestamp="2026-09-01T12:00:04Z")
    honest = _recall_ids(repo, lifecycle=["all"])
    request = normalize_request(at_commit=head(repo), lifecycle=["all"])
    honest_bytes = recall(repo, request).to_json()
    if statements[0].startswith(("DELETE", "INSERT")):
        # A hidden row, or one no key names, is not visible at query time; verify finds it.
        _tamper(repo, *statements)
        with pytest.raises(Conflict, match="derived projection changed"):
            verify_index(repo)
        _open(repo, rebuild=True).close()
    else:
        _tamper(repo, *statements)
    assert recall(repo, request).to_json() == honest_bytes
    assert _recall_ids(repo, lifecycle=["all"]) == honest
    assert _recall_ids(repo) == honest[:2]
    verify_index(repo)  # rebuilt: consistent again
    conn = sqlite3.connect(_dir(repo) / INDEX_NAME)
    names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert "evil" not in names and "v" not in names


# The layout of format 8 (one query context per file: trust and applicability in the rows),
# as the previous release left it.
_FORMAT_8 = [
    "DROP TABLE reach",
    "DROP TABLE anchors",
    "DROP TABLE actors",
    "DROP TABLE missing_objects",
    "CREATE TABLE classes (cls INTEGER PRIMARY KEY, trust TEXT NOT NULL, kind TEXT NOT NULL,"
    " actor TEXT NOT NULL, UNIQUE (trust, kind, actor)) STRICT",
    "INSERT INTO meta VALUES ('at_commit', '0000000000000000000000000000000000000000')",
    "UPDATE meta SET value = 'pal-hn-memory-index/8' WHERE key = 'format'",
]


# Format 9 had no covering index for the per-class totals.
_FORMAT_9 = [
    "DROP INDEX row_keys_group",
    "UPDATE meta SET value = 'pal-hn-memory-index/9' WHERE key = 'format'",
]


@pytest.mark.parametrize("statements", [_FORMAT_8, _FORMAT_8[-1:], _FORMAT_9],
                         ids=["format-8", "tag-only", "format-9"])  # fmt: skip
def test_index_of_an_older_format_is_rebuilt(
    repo: pygit2.Repository, monkeypatch: pytest.MonkeyPatch, statements: list[str]
) -> None:
    request = normalize_request(at_commit=head(repo), query="first")
    honest = recall(repo, request).to_json()
    _tamper(repo, *statements)
    rebuilds: list[int] = []
    real = index_module._rebuild
    monkeypatch.setattr(
        index_module, "_rebuild", lambda *a, **k: rebuilds.append(1) or real(*a, **k)
    )
    assert recall(repo, request).to_json() == honest
    assert rebuilds == [1]
    conn = sqlite3.connect(_dir(repo) / INDEX_NAME)
    names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
    (tag,) = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    conn.close()
    assert tag == FORMAT == "pal-hn-memory-index/10"
    assert {"terms", "row_keys", "anchors", "reach", "row_keys_group"} <= names
    assert "classes" not in names
    verify_index(repo)


@pytest.mark.parametrize(
    ("statements", "caught_by"),
    [
        # A retracted row made to look active and eligible to the keys and postings: the page's
        # MAC-checked row disagrees with the filters, so the index is rebuilt and the answer is
        # honest.
        (
            [
                "UPDATE row_keys SET eligible = 1, lifecycle_rank = 0,"
                " doc = ((1 + cls) << 32) | rid WHERE lifecycle_rank = 2",
                "INSERT INTO terms (rowid, words) SELECT doc, 'w7468697264' FROM row_keys"
                " WHERE id IN (SELECT id FROM rows WHERE lifecycle = 'retracted')",
            ],
            "query",
        ),
        (["UPDATE actors SET actor = upper(actor)"], "verify"),
        # Hidden or extra postings cannot be seen from one answer; verify re-derives them.
        (["UPDATE row_keys SET eligible = 0"], "verify"),
        (["UPDATE row_keys SET timestamp = '0000'"], "verify"),
        (["INSERT INTO terms (rowid, words) SELECT rid, 'w7468697264' FROM row_keys"], "verify"),
        (["DELETE FROM row_keys WHERE id = (SELECT min(id) FROM row_keys)"], "verify"),
        (["UPDATE row_keys SET aid = aid + 1"], "verify"),
    ],
    ids=["smuggled-row", "forged-actor", "hidden-rows", "forged-order", "extra-postings",
         "missing-key", "forged-anchor"],
)  # fmt: skip
def test_tampered_keys_and_postings(
    repo: pygit2.Repository, alice: Identity, statements: list[str], caught_by: str
) -> None:
    third = remember(repo, alice, "third", timestamp="2026-09-01T12:00:03Z")
    lifecycle(repo, alice, "retract", third.memory_id, timestamp="2026-09-01T12:00:04Z")
    asks = [{"query": "third"}, {"query": "first"}, {"query": "third", "lifecycle": ["all"]}]
    honest = [_recall_ids(repo, **flags) for flags in asks]
    assert honest == [[], [_recall_ids(repo)[1]], [third.memory_id]]
    _tamper(repo, *statements)
    if caught_by == "verify":
        with pytest.raises(Conflict, match="derived projection changed"):
            verify_index(repo)
        _open(repo, rebuild=True).close()
    assert [_recall_ids(repo, **flags) for flags in asks] == honest
    verify_index(repo)


@pytest.mark.parametrize(
    "garbage", [b"", b"not a database at all", b"SQLite format 3\x00" + b"\xff" * 200]
)
def test_garbage_index_is_rebuilt(repo: pygit2.Repository, garbage: bytes) -> None:
    honest = _recall_ids(repo)
    path = _dir(repo) / INDEX_NAME
    path.write_bytes(garbage)
    assert _recall_ids(repo) == honest


def test_planted_wal_garbage_is_harmless(repo: pygit2.Repository) -> None:
    honest = _recall_ids(repo)
    index_core.forget(_dir(repo) / INDEX_NAME)  # as a new process would see the files
    for suffix in ("-wal", "-shm"):
        side = _dir(repo) / (INDEX_NAME + suffix)
        side.write_bytes(b"planted garbage" * 100)
        os.chmod(side, 0o600)
    assert _recall_ids(repo) == honest
    verify_index(repo)


@pytest.mark.parametrize("attack", ["symlink", "mode-0644"])
def test_unsafe_wal_file_forces_a_rebuild(
    repo: pygit2.Repository, tmp_path: Path, attack: str
) -> None:
    honest = _recall_ids(repo)
    index_core.forget(_dir(repo) / INDEX_NAME)
    wal = _dir(repo) / (INDEX_NAME + "-wal")
    wal.unlink(missing_ok=True)
    if attack == "symlink":
        victim = tmp_path / "victim"
        victim.write_bytes(b"precious")
        wal.symlink_to(victim)
    else:
        wal.write_bytes(b"")
        os.chmod(wal, 0o644)
    assert _recall_ids(repo) == honest
    assert not wal.is_symlink()
    if attack == "symlink":
        assert victim.read_bytes() == b"precious"
    else:
        assert not wal.exists() or stat.S_IMODE(os.lstat(wal).st_mode) == 0o600


def test_failed_rebuild_keeps_the_old_file_and_leaves_no_temporary(
    repo: pygit2.Repository, alice: Identity
) -> None:
    _open(repo).close()
    path = _dir(repo) / INDEX_NAME
    before = path.read_bytes()
    # A memory ref that points at an ordinary commit: collection fails closed.
    repo.references.create(f"refs/hn/memory/{alice.actor}/{'cd' * 32}", repo.head.target)
    with pytest.raises(InvalidInput):
        _open(repo, rebuild=True)
    assert path.read_bytes() == before
    assert not [n for n in os.listdir(_dir(repo)) if n.startswith(".hn-private-")]


def test_verify_states(repo: pygit2.Repository, alice: Identity) -> None:
    with pytest.raises(NotFound, match="missing"):
        verify_index(repo)
    _open(repo).close()
    assert verify_index(repo).records == 2
    remember(repo, alice, "not yet indexed")
    with pytest.raises(Conflict, match="stale: source or policy changed"):
        verify_index(repo)
    _open(repo).close()
    assert verify_index(repo).records == 3


def test_one_append_reads_only_that_stream(
    repo: pygit2.Repository, alice: Identity, bob: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    remember(repo, bob, "bob's stream")
    _open(repo).close()
    calls: list[tuple[str, str]] = []
    real_full, real_since = store.load_stream, store.load_stream_since

    def full(repo_: Any, ref: store.MemoryRef, **kw: Any) -> Any:
        calls.append(("full", ref.actor))
        return real_full(repo_, ref, **kw)

    def since(repo_: Any, ref: store.MemoryRef, *args: Any) -> Any:
        calls.append(("since", ref.actor))
        return real_since(repo_, ref, *args)

    monkeypatch.setattr(store, "load_stream", full)
    monkeypatch.setattr(store, "load_stream_since", since)
    new = remember(repo, alice, "newest", timestamp="2026-09-01T12:30:00Z")
    with _open(repo) as index:
        assert index.state.records == 4
    assert calls == [("since", alice.actor)]
    assert _recall_ids(repo)[0] == new.memory_id
    verify_index(repo)


def test_rewritten_stream_triggers_a_full_rebuild(repo: pygit2.Repository, alice: Identity) -> None:
    _open(repo).close()
    ref_name = store.local_ref_name(alice.actor, store_default(alice))
    first = repo.references[ref_name].peel(pygit2.Commit).parents[0]
    repo.references[ref_name].set_target(first.id)  # roll the stream back one entry
    assert len(_recall_ids(repo)) == 1
    verify_index(repo)


def store_default(who: Identity) -> str:
    from palimpsest.hn.envelope import default_stream

    return default_stream(who.actor)


def test_another_context_needs_no_rebuild(
    repo: pygit2.Repository, alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.hn.recall_helpers import commit_files

    old = head(repo)
    only_here = remember(repo, alice, "exact here", applies="exact")
    _open(repo).close()
    rebuilds: list[int] = []
    real = index_module._rebuild
    monkeypatch.setattr(
        index_module, "_rebuild", lambda *a, **k: rebuilds.append(1) or real(*a, **k)
    )
    commit_files(repo, {"x": b"1"}, "move on")
    assert only_here.memory_id not in _recall_ids(repo)
    result = recall(repo, normalize_request(at_commit=old))
    assert only_here.memory_id in [json.loads(r)["id"] for r in result.records]
    assert recall(repo, normalize_request(at_commit=old, subject="issue:sha256:" + "a" * 64))
    assert rebuilds == []


def test_index_commands_on_the_fixture(fixture_repo: Path) -> None:
    from tests.hn.recall_helpers import pal

    rebuilt = pal(fixture_repo, "index", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert rebuilt.stdout == (
        f"Memory index rebuild: version 0, source {FIXTURE_SOURCE}, records 7\n".encode()
    )
    verified = pal(fixture_repo, "index", "verify", "--json")
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout) == {
        "version": 0, "operation": "verify", "sourceFingerprint": FIXTURE_SOURCE, "records": 7,
    }  # fmt: skip
    conn = sqlite3.connect(Path(fixture_repo) / ".git" / "hn" / "memory" / INDEX_NAME)
    conn.execute("UPDATE rows SET lifecycle = 'retracted'")
    conn.commit()
    conn.close()
    stale = pal(fixture_repo, "index", "verify")
    assert stale.returncode == 1 and stale.stdout == b""
    assert stale.stderr == b"pal: memory index stale: derived projection changed\n"


def test_locked_index_is_a_clear_error(
    repo: pygit2.Repository, alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    honest = _recall_ids(repo)
    monkeypatch.setattr(index_core, "BUSY_TIMEOUT", 0.05)
    index_core.forget(_dir(repo) / INDEX_NAME)
    other = sqlite3.connect(_dir(repo) / INDEX_NAME, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another process is writing
    remember(repo, alice, "arrives while locked")
    with pytest.raises(Unavailable) as info:
        _recall_ids(repo)
    assert info.value.code == "index-unavailable"
    other.execute("ROLLBACK")
    other.close()
    assert len(_recall_ids(repo)) == len(honest) + 1
