"""``pal memory`` takes what a person types where it names a memory or evidence: a prefix of
a memory's ID for ``retract``, ``challenge`` and ``supersede`` (as ``show`` does), a revision
for ``git:`` evidence, and a refusal that lists the accepted forms."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest

from palimpsest.identity import export_document
from tests.hn.clirun import pal, refused
from tests.hn.helpers import ALICE, BOB
from tests.hn.streams import head_commit, new_repo
from tests.hn.test_cli import Cap, mem, payload_of, record


@pytest.fixture
def repo(tmp_path: Path, capsysbinary: Cap) -> Path:
    path = tmp_path / "work"
    new_repo(path)
    doc = tmp_path / "alice.json"
    doc.write_bytes(export_document(ALICE))
    assert pal(capsysbinary, "id", "--repo", str(path), "import", str(doc)).code == 0
    return path


def test_retract_and_supersede_take_a_prefix(repo: Path, capsysbinary: Cap) -> None:
    first = record(capsysbinary, repo, "--content", "first")["memoryId"]
    second = record(capsysbinary, repo, "--content", "second")["memoryId"]
    newer = mem(capsysbinary, repo, "supersede", first[7:17], "--kind", "decision", "--at",
                "HEAD", "--applies", "descendants", "--content", "first, corrected", "--json")
    assert newer.code == 0, newer.err
    assert payload_of(repo, json.loads(newer.out)["memoryId"])["target"] == first
    gone = mem(capsysbinary, repo, "retract", second[7:15], "--reason", "incorrect", "--json")
    assert gone.code == 0, gone.err
    assert payload_of(repo, json.loads(gone.out)["memoryId"])["target"] == second
    shown = json.loads(mem(capsysbinary, repo, "show", second[7:15], "--json").out)
    assert shown["projection"]["lifecycle"] == "retracted"
    assert "at least 8 hex" in refused(
        mem(capsysbinary, repo, "retract", first[7:12], "--reason", "incorrect"))


def test_challenge_takes_a_prefix_and_evidence_as_typed(repo: Path, tmp_path: Path,
                                                        capsysbinary: Cap) -> None:
    mine = record(capsysbinary, repo, "--content", "alice says")["memoryId"]
    doc = tmp_path / "bob.json"
    doc.write_bytes(export_document(BOB))
    assert pal(capsysbinary, "id", "--repo", str(repo), "import", str(doc)).code == 0
    head = head_commit(pygit2.Repository(str(repo)))
    made = mem(capsysbinary, repo, "challenge", mine[7:19], "--reason", "evidence-mismatch",
               "--evidence", "git:HEAD", "--evidence", f"memory:{mine[7:15]}", "--json")
    assert made.code == 0, made.err
    signed = payload_of(repo, json.loads(made.out)["memoryId"])
    assert signed["target"] == mine
    assert signed["evidence"] == [f"git:{head}", f"memory:{mine}"]


@pytest.mark.parametrize("value", ["abc123", "sha:abc", "memory:abc", "event:1234"])
def test_bad_evidence_lists_the_accepted_forms(repo: Path, capsysbinary: Cap,
                                               value: str) -> None:
    message = refused(mem(capsysbinary, repo, "record", "--kind", "decision", "--at", "HEAD",
                          "--applies", "exact", "--evidence", value, "x"))
    for form in ("git:REV", "event:sha256:HEX64", "memory:ID"):
        assert form in message, message
