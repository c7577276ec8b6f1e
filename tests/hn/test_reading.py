"""hn/reading.py: the read shells shared by `pal memory` and the `pal mcp` repo tools."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from palimpsest.errors import InvalidInput
from palimpsest.hn import store
from palimpsest.hn.index import INDEX_NAME
from palimpsest.hn.reading import request_at, show_at, writers_of
from palimpsest.hn.recall import recall
from palimpsest.identity import Identity
from tests.hn.recall_helpers import head, new_repo, remember


def test_writers_name_each_memory_from_its_signed_envelope(
    tmp_path: Path, alice: Identity, bob: Identity
) -> None:
    repo = new_repo(tmp_path / "repo", trusted=[alice, bob])
    first = remember(repo, alice, "alpha note", timestamp="2026-01-02T00:00:00Z")
    second = remember(repo, bob, "beta note", timestamp="2026-01-01T00:00:00Z")
    request = request_at(repo, {})
    page = recall(repo, request).to_json()
    expected = [
        {"memoryId": first.memory_id, "actor": alice.actor, "actorName": "Alice Agent"},
        {"memoryId": second.memory_id, "actor": bob.actor, "actorName": "Bob Agent"},
    ]
    assert writers_of(repo, request, page) == expected
    # a stored envelope edited in the index is not believed: the names come from the refs
    conn = sqlite3.connect(store.git_dir(repo) / "hn" / "memory" / INDEX_NAME)
    conn.execute("UPDATE envelopes SET payload = CAST(replace(CAST(payload AS TEXT),"
                 " 'Bob Agent', 'Mallory') AS BLOB)")
    conn.commit()
    forged = conn.execute("SELECT count(*) FROM envelopes WHERE instr(payload, 'Mallory')")
    assert forged.fetchone() == (1,)
    conn.close()
    assert writers_of(repo, request, page) == expected
    empty = request_at(repo, {"query": "nothing-matches-this"})
    assert writers_of(repo, empty, recall(repo, empty).to_json()) == []


def test_request_at_resolves_revisions_and_keeps_the_strict_rules(
    tmp_path: Path, alice: Identity
) -> None:
    repo = new_repo(tmp_path / "repo", trusted=[alice])
    assert request_at(repo, {}).at_commit == head(repo)
    assert request_at(repo, {"atCommit": "main", "version": 0}).at_commit == head(repo)
    for bad, words in [
        ({"atCommit": 5}, "atCommit must be a revision"),
        ({"atCommit": "nope"}, "does not name a commit"),
        ({"version": 1}, "version must be the integer 0"),
        ({"maxRecords": None}, "maxRecords must be a positive integer"),
        ({"topic": "x"}, "topic"),
        ({"extra": True}, "unknown field 'extra'"),
    ]:
        with pytest.raises(InvalidInput, match=words):
            request_at(repo, bad)


def test_show_at_finds_by_prefix(tmp_path: Path, alice: Identity) -> None:
    repo = new_repo(tmp_path / "repo", trusted=[alice])
    made = remember(repo, alice, "gamma note")
    found, projection = show_at(repo, made.memory_id[7:15])
    assert found.memory_id == made.memory_id
    assert projection.policy_commit == head(repo)
    assert [row.id for row in projection.rows] == [made.memory_id]
    with pytest.raises(InvalidInput, match="at least 8 hex digits"):
        show_at(repo, "abc")
