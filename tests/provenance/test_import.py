"""``pal import --git``: an export brought into another server through quarantine → validate →
promote. A round trip gives the same rebuild digest; a hostile repository (the corpus in
``tests/adversarial/provenance/imports.json``) ends with a named outcome and nothing kept."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pygit2
import pytest

from palimpsest import canonical
from palimpsest.service import MemoryService
from palimpsest.service.memorygit.wiring import open_flow
from palimpsest.service.provenance import verify
from tests.adversarial.provenance import edits
from tests.api.server import pal_command
from tests.provenance.world import world

CASES = json.loads((Path(__file__).resolve().parents[1] / "adversarial" / "provenance"
                    / "imports.json").read_text())


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Server A's data directory, its export of every memory (``all.git``), of one memory
    (``one.git``), and its published keys (``keys.json``)."""
    root = tmp_path_factory.mktemp("import")
    mid, keys = world(root / "a")
    with MemoryService(root / "a") as svc:
        svc.export_git(root / "all.git")
        svc.export_git(root / "one.git", mid)
    (root / "keys.json").write_bytes(canonical.encode(keys))
    return root, mid


def _server(data: Path) -> str:
    with MemoryService(data) as svc:
        made = svc.bootstrap_owner()
        assert made is not None
        return made[0].id


def _import(data: Path, repo: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(pal_command("import", "--git", str(repo), "--data-dir", str(data),
                                      "--json", *args), capture_output=True, text=True,
                          check=False)
    return done.returncode, json.loads(done.stdout) if done.stdout else {}, done.stderr


def _state(data: Path) -> tuple[Any, ...]:
    with MemoryService(data) as svc:
        counts = svc.rebuild()
        memories = sorted(m.id for m in svc._store.all_memories())
        refs = sorted((m, r.name, r.head) for m in memories for r in svc._store.refs(m))
    return counts["changesets"], counts["digest_after"], memories, refs


def _leftovers(data: Path) -> list[str]:
    where = data / "provenance" / "imports"
    return sorted(p.name for p in where.iterdir() if p.name.startswith("txn-")) \
        if where.is_dir() else []


def test_export_then_import_gives_the_same_rebuild_digest(source: tuple[Path, str],
                                                          tmp_path: Path) -> None:
    root, mid = source
    _server(tmp_path / "b")
    code, report, err = _import(tmp_path / "b", root / "all.git", "--keys",
                                str(root / "keys.json"))
    assert code == 0, err
    assert report["status"] == "promoted" and report["promoted"]
    assert report["measurement"]["events"] >= 6
    with MemoryService(root / "a") as a, MemoryService(tmp_path / "b") as b:
        ra, rb = a.rebuild(), b.rebuild()
        assert rb["equal"] and rb["changesets"] == ra["changesets"] > 0
        assert rb["digest_after"] == ra["digest_after"]
        assert [(r.name, r.head) for r in b._store.refs(mid)] == [
            (r.name, r.head) for r in a._store.refs(mid)]
        owner = b.caller(b.list_members()[0].id)
        head = b.list_refs(owner, mid)["data"][0]["head_changeset_id"]
        roles = {s["role"] for s in b.changeset_signatures(owner, mid, head)["signatures"]}
        assert roles == {"server", "origin"}  # this server's, and the exporting server's
        b.export_git(tmp_path / "again.git")
        mine = {k["key_id"]: k["public_key"] for k in b.provenance_keys()["keys"]}
    # this server's export of what it imported verifies against this server's keys alone
    assert verify.verify(tmp_path / "again.git", mine)["ok"]
    assert _leftovers(tmp_path / "b") == []
    # importing the same history again changes nothing
    code, again, err = _import(tmp_path / "b", root / "all.git", "--keys",
                               str(root / "keys.json"))
    assert code == 0, err
    assert all(m["new_changesets"] == 0 and all(r["status"] == "unchanged" for r in m["refs"])
               for m in again["memories"])


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_a_hostile_repository_stays_in_quarantine(source: tuple[Path, str], tmp_path: Path,
                                                  case: dict[str, Any]) -> None:
    root, _mid = source
    copy = tmp_path / "hostile.git"
    shutil.copytree(root / "one.git", copy)
    edits.apply(pygit2.Repository(str(copy)), case["edit"])
    _server(tmp_path / "b")
    before = _state(tmp_path / "b")
    keys = ["--keys", str(root / "keys.json")] if case["pin_keys"] else ["--trust-carried-keys"]
    code, report, err = _import(tmp_path / "b", copy, *keys, *case.get("args", []))
    assert code == 1 and err.startswith(f"pal: import refused ({case['status']})"), err
    assert report["status"] == case["status"] and not report["promoted"]
    assert case["reason"] in report["diagnostic"], report["diagnostic"]
    assert report["memories"] == []
    assert _state(tmp_path / "b") == before  # nothing promoted: no memory, ref or changeset
    assert _leftovers(tmp_path / "b") == []


def test_an_import_needs_keys_it_is_told_to_trust(source: tuple[Path, str],
                                                  tmp_path: Path) -> None:
    root, _mid = source
    _server(tmp_path / "b")
    code, _report, err = _import(tmp_path / "b", root / "one.git")
    assert code == 1 and "--keys" in err


def test_a_history_this_server_moved_past_is_refused_as_a_fork(
        source: tuple[Path, str], tmp_path: Path) -> None:
    root, mid = source
    owner = _server(tmp_path / "b")
    keys = ["--keys", str(root / "keys.json")]
    assert _import(tmp_path / "b", root / "one.git", *keys)[0] == 0
    with MemoryService(tmp_path / "b") as b:
        b.remember(b.caller(owner), mid, {"content": "written here after the import"})
    before = _state(tmp_path / "b")
    code, report, _err = _import(tmp_path / "b", root / "one.git", *keys)
    assert code == 1 and report["status"] == "structurally-invalid"
    assert report["diagnostic"].startswith("fork: refs/shared/main")
    assert _state(tmp_path / "b") == before


def test_a_reviewed_import_waits_for_review(tmp_path: Path) -> None:
    mid, keys = world(tmp_path / "a")
    (tmp_path / "keys.json").write_bytes(canonical.encode(keys))
    with MemoryService(tmp_path / "a") as a:
        a.export_git(tmp_path / "first.git", mid)
        a_owner = a.caller(a.list_members()[0].id)
        a.remember(a_owner, mid, {"content": "the release train leaves on Thursdays"})
        a.export_git(tmp_path / "second.git", mid)
    owner = _server(tmp_path / "b")
    keys_arg = ["--keys", str(tmp_path / "keys.json")]
    assert _import(tmp_path / "b", tmp_path / "first.git", *keys_arg)[0] == 0
    with MemoryService(tmp_path / "b") as b:
        main_before = b._store.ref(mid, "refs/shared/main")
        listed_before = b.list_records(b.caller(owner), mid)["data"]
    code, report, err = _import(tmp_path / "b", tmp_path / "second.git", *keys_arg,
                                "--as", "reviewed", "--member", owner)
    assert code == 0, err
    [mem] = report["memories"]
    assert mem["proposal_id"] and all(r["ref"].startswith("refs/topics/imports/")
                                      for r in mem["refs"])
    with MemoryService(tmp_path / "b") as b:
        assert b._store.ref(mid, "refs/shared/main") == main_before
        assert b.list_records(b.caller(owner), mid)["data"] == listed_before  # not yet recalled
        proposals = open_flow(b).list_proposals(f"member:{owner}", mid, "open")
        assert [p["proposal_id"] for p in proposals] == [mem["proposal_id"]]
