"""Repository memory in the service (service/mounts.py): a memory whose provider is a real Git
repository's signed hn-memory/0 streams — what it serves equals the repository's own recall,
stays fresh without a restart, fails closed on a forged stream, refuses every write, and is
reached only through the server's grants and cutoffs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pygit2
import pytest

from palimpsest.errors import Forbidden, InvalidInput, NotFound, Unavailable
from palimpsest.hn.recall.request import normalize_request
from palimpsest.hn.recall.run import recall as hn_recall
from palimpsest.service import MemoryService
from palimpsest.service.model import Caller
from palimpsest.service.providers import REPOSITORY_SIGNALS
from tests.hn.helpers import ALICE, BOB
from tests.hn.recall_helpers import (
    commit_files,
    head,
    lifecycle,
    new_repo,
    policy_bytes,
    remember,
)
from tests.hn.streams import raw_tree

from .conftest import member

CORPUS = Path(__file__).parents[1] / "adversarial" / "mounts"


def _repo(path: Path) -> pygit2.Repository:
    """Alice trusted by policy, Bob not: two qualified memories of Alice, one of Bob."""
    repo = new_repo(path, [ALICE])
    remember(repo, ALICE, "alpha streams stay separate", kind="decision", topics=("arch",))
    remember(repo, ALICE, "gamma streams verified on read")
    remember(repo, BOB, "beta streams from an untrusted actor")
    return repo


def _mounted(svc: MemoryService, owner: Caller, tmp_path: Path
             ) -> tuple[pygit2.Repository, str, str]:
    """A service memory "Team" with one record and, below it, "Repo" mounted on a repository."""
    repo = _repo(tmp_path / "repo")
    team = svc.create_memory(owner, {"name": "Team"})["id"]
    svc.remember(owner, team, {"type": "note", "content": "service streams are indexed"})
    mid = svc.create_memory(owner, {"name": "Repo", "parent_id": team})["id"]
    done = svc.mount_repository(mid, tmp_path / "repo")
    assert done == {"object": "memory.mount", "memory_id": mid, "provider": "hn-memory",
                    "path": str((tmp_path / "repo").resolve())}
    return repo, team, mid


def _ids(answer: dict[str, Any], memory_id: str | None = None) -> list[str]:
    return [r["record"]["id"] for r in answer["results"]
            if memory_id is None or r["memory"]["id"] == memory_id]


def _hn(repo: pygit2.Repository, **filters: Any) -> list[dict[str, Any]]:
    """What the repository's own recall returns at HEAD (pal memory recall --json)."""
    result = hn_recall(repo, normalize_request(at_commit=head(repo), **filters))
    memories: list[dict[str, Any]] = json.loads(result.to_json())["memories"]
    return memories


def test_recall_serves_what_the_repository_recalls(svc: MemoryService, owner: Caller,
                                                   tmp_path: Path) -> None:
    repo, _, mid = _mounted(svc, owner, tmp_path)
    answer = svc.recall(owner, mid, {"text": "streams"})
    expected = _hn(repo, query="streams", max_records=8)
    assert [m["id"] for m in expected] and _ids(answer) == [m["id"] for m in expected]
    for got, want in zip(answer["results"], expected, strict=True):
        record = got["record"]
        assert record["content"] == [{"type": "text", "text": want["data"]["content"]}]
        for key in ("kind", "lifecycle", "trust", "actor", "signature", "stream",
                    "applicability", "evidence", "signedTimestamp", "contentDigest"):
            assert record["attributes"][key] == want[key], key
        assert record["written_by"] == {
            "kind": "provider", "id": "hn-memory",
            "on_behalf_of": {"kind": "member", "id": f"hn-actor:{want['actor']}"}}
        assert record["trust"] == "untrusted" and record["memory_id"] == mid
        assert got["memory"] == {"id": mid, "name": "Repo"} and got["score"] is None
    # Bob is not trusted: the default (qualified) leaves him out, as the repository does.
    assert BOB.actor not in {r["record"]["attributes"]["actor"] for r in answer["results"]}
    # Every term must be present, the repository's lexical rule.
    both = svc.recall(owner, mid, {"text": "gamma streams"})
    assert _ids(both) == [m["id"] for m in _hn(repo, query="gamma streams")]
    assert len(both["results"]) == 1


def test_one_question_covers_service_and_repository(svc: MemoryService, owner: Caller,
                                                    tmp_path: Path) -> None:
    repo, team, mid = _mounted(svc, owner, tmp_path)
    answer = svc.recall(owner, team, {"text": "streams", "limit": 50})
    assert {r["memory"]["name"] for r in answer["results"]} == {"Team", "Repo"}
    assert _ids(answer, mid) == [m["id"] for m in _hn(repo, query="streams")]
    assert answer["degraded"] == [] and answer["abstain"] is False
    # depth 0 asks the parent alone: the repository below it is not read.
    assert _ids(svc.recall(owner, team, {"text": "streams", "depth": 0}), mid) == []
    # a limit counts the whole answer, one of each provider first
    two = svc.recall(owner, team, {"text": "streams", "limit": 2})
    assert [r["memory"]["name"] for r in two["results"]] == ["Team", "Repo"]


def test_fresh_on_the_next_read(svc: MemoryService, owner: Caller, tmp_path: Path) -> None:
    repo, _, mid = _mounted(svc, owner, tmp_path)
    before = _ids(svc.recall(owner, mid, {"text": "streams"}))
    added = remember(repo, ALICE, "delta streams appended after the mount")
    after = svc.recall(owner, mid, {"text": "streams"})
    assert _ids(after) == [m["id"] for m in _hn(repo, query="streams")]
    assert added.memory_id in _ids(after) and set(before) < set(_ids(after))
    # a retraction is a new signed fact: the retracted memory leaves the active answer
    lifecycle(repo, ALICE, "retract", added.memory_id)
    assert added.memory_id not in _ids(svc.recall(owner, mid, {"text": "streams"}))
    gone = svc.recall(owner, mid, {"text": "delta", "include": "all"})
    assert [(r["record"]["id"], r["record"]["status"], r["record"]["attributes"]["lifecycle"])
            for r in gone["results"]] == [(added.memory_id, "forgotten", "retracted")]
    # a new commit whose policy trusts Bob: his memory is qualified on the next read
    commit_files(repo, {".hn/policy.json": _policy(ALICE.actor, BOB.actor)}, "trust bob")
    assert BOB.actor in {r["record"]["attributes"]["actor"]
                         for r in svc.recall(owner, mid, {"text": "beta"})["results"]}


def _policy(*actors: str) -> bytes:
    return policy_bytes(list(actors))


def test_filters_reach_the_repository(svc: MemoryService, owner: Caller,
                                      tmp_path: Path) -> None:
    repo, _, mid = _mounted(svc, owner, tmp_path)
    untrusted = svc.recall(owner, mid, {"text": "streams", "filters": {
        "field": "attributes.trust", "op": "in", "value": ["actor-untrusted", "qualified"]}})
    assert _ids(untrusted) == [m["id"] for m in _hn(
        repo, query="streams", trust=["actor-untrusted", "qualified"])]
    assert {r["record"]["attributes"]["trust"] for r in untrusted["results"]} == {
        "actor-untrusted", "qualified"}
    decisions = svc.recall(owner, mid, {"filters": {"field": "attributes.kind", "op": "eq",
                                                    "value": "decision"}})
    assert [r["record"]["content"][0]["text"] for r in decisions["results"]] == [
        "alpha streams stay separate"]
    # a condition the repository has no filter for is checked on every record
    topics = svc.recall(owner, mid, {"filters": {"and": [
        {"field": "attributes.data.topics", "op": "contains", "value": "arch"},
        {"field": "attributes.lifecycle", "op": "eq", "value": "active"}]}})
    assert [r["record"]["content"][0]["text"] for r in topics["results"]] == [
        "alpha streams stay separate"]
    assert svc.recall(owner, mid, {"text": "streams", "types": ["fact"]})["results"] == []
    as_of = svc.recall(owner, mid, {"text": "streams", "as_of": "2026-01-01T00:00:00Z"})
    assert as_of["results"] == [] and as_of["degraded"] == [f"as_of:not_supported_by:{mid}"]


def test_capability_document_is_truthful(svc: MemoryService, owner: Caller,
                                         tmp_path: Path) -> None:
    _, _, mid = _mounted(svc, owner, tmp_path)
    docs = {d["id"]: d for d in svc.providers(owner)["data"]}
    doc = docs["hn-memory"]
    assert doc["recall"]["signals"] == list(REPOSITORY_SIGNALS)
    assert (doc["revise"], doc["forget"], doc["erase"]) == (False, False, False)
    assert doc["history"] == {"content": "versions", "structure": "none"}
    probes = {"query": {"query": "streams"}, "text": {"text": "streams"},
              "filters": {"filters": {"field": "attributes.kind", "op": "eq",
                                      "value": "decision"}}}
    for signal, body in probes.items():
        out = svc.recall(owner, mid, body)
        declared = signal in doc["recall"]["signals"]
        assert (f"{signal}:not_supported" in out["degraded"]) is (not declared)
        assert out["results"], signal  # a declared signal answers; query words lexically
    assert svc.get_memory(owner, mid)["provider"] == "hn-memory"


def test_every_write_is_unsupported_and_forbidden_first(svc: MemoryService, owner: Caller,
                                                        tmp_path: Path) -> None:
    repo, _, mid = _mounted(svc, owner, tmp_path)
    rid = _hn(repo)[0]["id"]
    writes = [
        lambda c: svc.remember(c, mid, {"content": "x"}),
        lambda c: svc.revise(c, mid, rid, {"content": "x"}),
        lambda c: svc.forget(c, mid, rid),
        lambda c: svc.erase(c, mid, {"record_ids": [rid]}),
        lambda c: svc.observe(c, mid, {"episodes": [{"content": "x"}]}),
        lambda c: svc.consolidate(c, mid, {}),
        lambda c: svc.create_snapshot(c, mid, {"name": "s"}),
    ]
    for write in writes:
        with pytest.raises(InvalidInput) as exc:
            write(owner)
        assert exc.value.code == "memory_unsupported"
    reader = member(svc, "reader")
    svc.put_grant(owner, mid, {"principal": f"member:{reader.member.id}",
                               "privileges": ["read"]})
    for write in writes[:3]:
        with pytest.raises(Forbidden):  # the privilege is judged before the provider
            write(reader)
    assert svc._store.refs(mid) == []  # nothing was written
    with pytest.raises(InvalidInput) as made:
        svc.create_memory(owner, {"name": "R2", "provider": "hn-memory"})
    assert made.value.code == "memory_unsupported" and "mount-repo" in made.value.message
    child = svc.create_memory(owner, {"name": "Below", "parent_id": mid})
    assert child["provider"] == "builtin"


def test_grants_and_cutoffs_decide_before_the_repository(svc: MemoryService, owner: Caller,
                                                         tmp_path: Path) -> None:
    repo, team, mid = _mounted(svc, owner, tmp_path)
    stranger = member(svc, "stranger")
    with pytest.raises(NotFound) as unseen:
        svc.recall(stranger, mid, {"text": "streams"})
    assert unseen.value.code == "memory_not_found"
    with pytest.raises(NotFound) as unknown:
        svc.recall(stranger, "hmem_doesnotexist", {"text": "streams"})
    assert (unknown.value.code, unknown.value.message) == (unseen.value.code,
                                                           unseen.value.message)
    # a reader of the parent reaches the repository below it …
    reader = member(svc, "reader")
    svc.put_grant(owner, team, {"principal": f"member:{reader.member.id}",
                                "privileges": ["read"]})
    assert _ids(svc.recall(reader, team, {"text": "streams"}), mid)
    # … until the repository's memory is restricted: then nothing of it, not even its name
    svc.update_memory(owner, mid, {"restricted": True})
    closed = svc.recall(reader, team, {"text": "streams", "limit": 50})
    assert _ids(closed, mid) == [] and mid not in json.dumps(closed)
    # a grant on the restricted memory itself opens it again
    svc.put_grant(owner, mid, {"principal": f"member:{reader.member.id}",
                               "privileges": ["read"]})
    assert _ids(svc.recall(reader, mid, {"text": "streams"})) == [
        m["id"] for m in _hn(repo, query="streams", max_records=8)]


def _forge(repo: pygit2.Repository, case: dict[str, Any]) -> None:
    """Rewrite Bob's stream head as the corpus case says and move his ref to the forgery."""
    name = next(r for r in repo.references if r.startswith(f"refs/hn/memory/{BOB.actor}/"))
    commit = repo[repo.references[name].target]
    if case["action"] == "move-ref":
        stream = name.rsplit("/", 1)[1]
        repo.references.create(f"refs/hn/memory/{ALICE.actor}/{stream}", commit.id)
        repo.references.delete(name)
        return
    files = {e.name: (e.filemode, e.id) for e in commit.tree}
    target = case["file"]
    if case["action"] == "remove":
        del files[target]
    elif case["action"] == "add":
        files[target] = (pygit2.enums.FileMode.BLOB, repo.create_blob(case["data"].encode()))
    else:
        data = bytearray(repo[files[target][1]].data)
        if case["action"] == "flip":
            data[case["offset"]] ^= 1
        else:
            assert case["old"].encode() in data
            data = bytearray(bytes(data).replace(case["old"].encode(), case["new"].encode(), 1))
        files[target] = (files[target][0], repo.create_blob(bytes(data)))
    tree = raw_tree(repo, [(f"{int(mode):o}", n, oid) for n, (mode, oid) in sorted(files.items())])
    lines = [f"tree {tree}"] + [f"parent {p}" for p in commit.parent_ids]
    lines += ["author A <a@hn.invalid> 0 +0000", "committer A <a@hn.invalid> 0 +0000", "", "m", ""]
    forged = repo.odb.write(pygit2.enums.ObjectType.COMMIT, "\n".join(lines).encode())
    repo.references.create(name, forged, force=True)


@pytest.mark.parametrize("case", sorted(json.loads((CORPUS / "tampers.json").read_text())))
def test_forged_stream_serves_nothing_of_the_repository(svc: MemoryService, owner: Caller,
                                                         tmp_path: Path, case: str) -> None:
    repo, team, mid = _mounted(svc, owner, tmp_path)
    assert _ids(svc.recall(owner, mid, {"text": "streams"}))  # served before the forgery
    _forge(repo, json.loads((CORPUS / "tampers.json").read_text())[case])
    with pytest.raises(InvalidInput) as refused:
        _hn(repo, query="streams")  # the repository's own recall refuses it
    answer = svc.recall(owner, team, {"text": "streams", "limit": 50})
    assert _ids(answer, mid) == []
    assert answer["degraded"] == [f"repository:{mid}:{refused.value.code}"]
    assert [r["memory"]["name"] for r in answer["results"]] == ["Team"]


@pytest.mark.parametrize("case", sorted(json.loads((CORPUS / "paths.json").read_text())))
def test_a_bad_path_is_refused_and_nothing_mounted(svc: MemoryService, owner: Caller,
                                                   tmp_path: Path, case: str) -> None:
    spec = json.loads((CORPUS / "paths.json").read_text())[case]
    target = tmp_path / "target"
    if spec["make"] == "directory":
        target.mkdir()
    elif spec["make"] == "file":
        target.write_text("not a repository\n")
    elif spec["make"] == "subdirectory":
        _repo(tmp_path / "repo")
        target = tmp_path / "repo" / "docs"
        target.mkdir()
    elif spec["make"] == "empty-repository":
        pygit2.init_repository(str(target))
    mid = svc.create_memory(owner, {"name": "Empty"})["id"]
    with pytest.raises(InvalidInput) as refused:
        svc.mount_repository(mid, target)
    assert refused.value.code == "memory_invalid" and spec["says"] in refused.value.message
    assert svc.get_memory(owner, mid)["provider"] == "builtin"


def test_only_an_empty_memory_is_mounted_once(svc: MemoryService, owner: Caller,
                                              tmp_path: Path) -> None:
    _repo(tmp_path / "repo")
    full = svc.create_memory(owner, {"name": "Full"})["id"]
    svc.remember(owner, full, {"content": "already here"})
    with pytest.raises(InvalidInput) as held:
        svc.mount_repository(full, tmp_path / "repo")
    assert "holds records" in held.value.message
    with pytest.raises(NotFound):
        svc.mount_repository("hmem_nosuchmemory", tmp_path / "repo")
    mid = svc.create_memory(owner, {"name": "Repo"})["id"]
    svc.mount_repository(mid, tmp_path / "repo")
    with pytest.raises(InvalidInput) as twice:
        svc.mount_repository(mid, tmp_path / "repo")
    assert "already reads" in twice.value.message
    # a mount is no projection: the history re-derives to what is stored
    report = svc.rebuild()
    assert report["equal"] is True and report["written"] is False
    # deleting the memory unmounts it; the repository is left as it was
    refs = {r: str(pygit2.Repository(str(tmp_path / "repo")).references[r].target)
            for r in pygit2.Repository(str(tmp_path / "repo")).references}
    svc.delete_memory(owner, mid)
    assert svc._store.mounts() == {}
    after = pygit2.Repository(str(tmp_path / "repo"))
    assert {r: str(after.references[r].target) for r in after.references} == refs


def test_provenance_of_a_repository_memory_is_its_own_signature(
        svc: MemoryService, owner: Caller, tmp_path: Path) -> None:
    repo, team, mid = _mounted(svc, owner, tmp_path)
    answer = svc.recall(owner, team, {"text": "streams", "limit": 50,
                                      "include": ["provenance"]})
    by_memory = {r["memory"]["id"]: r["record"]["provenance"] for r in answer["results"]}
    assert by_memory[team]["object"] == "memory.receipt"  # the server's signed receipt
    expected = {m["id"]: m for m in _hn(repo, query="streams")}
    for result in answer["results"]:
        if result["memory"]["id"] != mid:
            continue
        got, want = result["record"]["provenance"], expected[result["record"]["id"]]
        assert got == {"object": "memory.provenance", "source": "hn-memory/0",
                       "memory": want["id"], "stream": want["stream"], "actor": want["actor"],
                       "signature": "valid", "contentDigest": want["contentDigest"],
                       "verify": f"pal memory show {want['id']} --json, in the repository"}


def test_list_get_and_history_read_the_repository(svc: MemoryService, owner: Caller,
                                                  tmp_path: Path) -> None:
    repo, team, mid = _mounted(svc, owner, tmp_path)
    served = _hn(repo, max_records=200)
    listed = svc.list_records(owner, mid, limit=1)
    assert [r["id"] for r in listed["data"]] == [served[0]["id"]] and listed["next"]
    rest = svc.list_records(owner, mid, limit=1, cursor=listed["next"])
    assert [r["id"] for r in rest["data"]] == [m["id"] for m in served[1:]]
    assert rest["next"] is None and rest["parent"]["id"] == team
    # the repository's cursor binds its list (hn-memory §16.8): another limit, or a made-up
    # cursor, is refused rather than answered from the wrong place
    for cursor, limit in ((listed["next"], 50), ("12", 1)):
        with pytest.raises(InvalidInput) as bad:
            svc.list_records(owner, mid, limit=limit, cursor=cursor)
        assert bad.value.code == "memory_invalid"
    assert svc.list_records(owner, mid, type="fact")["data"] == []
    # counts are what it serves by default (Alice's two; Bob is untrusted)
    assert svc.get_memory(owner, mid)["records"] == {"count": len(served)} and len(served) == 2
    kids = svc.list_records(owner, team)["children"]
    assert kids == [{"id": mid, "name": "Repo", "description": "", "records": {"count": 2}}]
    # one record by id — also Bob's, whose trust class it states
    bob = _hn(repo, trust=["actor-untrusted"])[0]
    got = svc.get_record(owner, mid, bob["id"])
    assert got["attributes"]["trust"] == "actor-untrusted" and got["id"] == bob["id"]
    assert svc.record_history(owner, mid, bob["id"])["data"] == [got]
    for missing in ("sha256:" + "0" * 64, "hrec_notarepositorymemory"):
        with pytest.raises(NotFound) as gone:
            svc.get_record(owner, mid, missing)
        assert gone.value.code == "memory_record_not_found"
    with pytest.raises(InvalidInput) as timed:
        svc.get_record(owner, mid, bob["id"], as_of="2026-01-01T00:00:00Z")
    assert timed.value.code == "memory_unsupported"
    # a service record id is not found through the mounted memory, nor the other way round
    stored = svc.list_records(owner, team)["data"][0]["id"]
    with pytest.raises(NotFound):
        svc.get_record(owner, mid, stored)
    with pytest.raises(NotFound):
        svc.get_record(owner, team, bob["id"])
    # a stranger learns nothing through these routes either
    stranger = member(svc, "stranger")
    for read in (lambda: svc.list_records(stranger, mid),
                 lambda: svc.get_record(stranger, mid, bob["id"])):
        with pytest.raises(NotFound) as unseen:
            read()
        assert unseen.value.code == "memory_not_found"


def test_a_forged_stream_makes_reads_unavailable(svc: MemoryService, owner: Caller,
                                                  tmp_path: Path) -> None:
    repo, _, mid = _mounted(svc, owner, tmp_path)
    rid = _hn(repo)[0]["id"]
    _forge(repo, json.loads((CORPUS / "tampers.json").read_text())["signature-bit-flipped"])
    for read in (lambda: svc.list_records(owner, mid), lambda: svc.get_record(owner, mid, rid)):
        with pytest.raises(Unavailable) as down:
            read()
        assert down.value.code == "memory_unavailable" and "signature" in down.value.message


def test_a_vanished_repository_is_said_without_its_path(svc: MemoryService, owner: Caller,
                                                         tmp_path: Path) -> None:
    _, team, mid = _mounted(svc, owner, tmp_path)
    shutil.rmtree(tmp_path / "repo")
    answer = svc.recall(owner, team, {"text": "streams", "limit": 50})
    assert _ids(answer, mid) == [] and [r["memory"]["name"] for r in answer["results"]] == [
        "Team"]
    assert answer["degraded"] == [f"repository:{mid}:not-a-repository"]
    with pytest.raises(Unavailable) as down:
        svc.list_records(owner, mid)
    assert down.value.code == "memory_unavailable"
    assert str(tmp_path) not in down.value.message and str(tmp_path) not in json.dumps(answer)
    assert svc.get_memory(owner, mid)["records"]["count"] == 0  # it serves nothing now
