"""``pal export --git`` and ``pal verify DIR``: a real Git repository of the signed history,
checked offline; every edit of the hostile corpus is refused naming what failed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pygit2
import pytest

from palimpsest import canonical
from palimpsest.service import MemoryService
from palimpsest.service.provenance import layout, signing, verify
from palimpsest.service.provenance.receipt import Refused
from tests.adversarial.provenance import edits
from tests.api.server import pal_command
from tests.provenance.world import world
from tests.stored import grep_data_dir

CASES = json.loads((Path(__file__).resolve().parents[1] / "adversarial" / "provenance"
                    / "exports.json").read_text())


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("export")
    mid, keys = world(root / "data")
    done = subprocess.run(pal_command("export", "--git", str(root / "repo"), "--memory", mid,
                                      "--data-dir", str(root / "data"), "--json"),
                          capture_output=True, check=True)
    report = json.loads(done.stdout)
    assert report["memories"] == [mid] and report["changesets"] >= 6
    return root, mid, keys


def test_an_untouched_export_verifies_without_the_server(
        exported: tuple[Path, str, dict[str, Any]], tmp_path: Path) -> None:
    root, _mid, keys = exported
    moved = tmp_path / "elsewhere"
    shutil.copytree(root / "repo", moved)  # a machine with the repository and nothing else
    keys_file = tmp_path / "keys.json"
    keys_file.write_bytes(canonical.encode(keys))
    done = subprocess.run(pal_command("verify", str(moved), "--keys", str(keys_file), "--json"),
                          capture_output=True, check=True, env={**os.environ, "PAL_DATA_DIR":
                                                                 str(tmp_path / "none")})
    report = json.loads(done.stdout)
    assert report["ok"] and report["keys"] == "given with --keys"
    assert report["signatures"] == report["changesets"] + 1  # the agent's own signature too
    log = subprocess.run(["git", "-C", str(moved), "log", "--format=%s", "refs/shared/main"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert "remember" in log and "revise" in log and "erase" in log
    refs = subprocess.run(["git", "-C", str(moved), "for-each-ref", "--format=%(refname)"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert "refs/shared/main" in refs and any(r.startswith("refs/agents/") for r in refs)


def test_erased_bodies_stay_erased_and_their_digests_stay(
        exported: tuple[Path, str, dict[str, Any]]) -> None:
    root, _mid, _keys = exported
    assert grep_data_dir(root / "repo", "Quillwort") == []
    repo = pygit2.Repository(str(root / "repo"))
    erased = 0
    for commit in repo.walk(repo.references["refs/shared/main"].target):
        content = json.loads(commit.tree[layout.CHANGESET].data)
        held = {e.name for e in repo[commit.tree[layout.BODIES].id]} \
            if layout.BODIES in commit.tree else set()
        erased += len(layout.body_digests(content) - held)
    assert erased >= 1


def test_an_export_of_every_memory_namespaces_refs(tmp_path: Path) -> None:
    mid, _keys = world(tmp_path / "data")
    with MemoryService(tmp_path / "data") as svc:
        report = svc.export_git(tmp_path / "all")
        with pytest.raises(Exception, match="not empty"):
            svc.export_git(tmp_path / "all")
    assert len(report["memories"]) == 2
    names = list(pygit2.Repository(str(tmp_path / "all")).references)
    assert f"refs/memories/{mid}/shared/main" in names
    assert verify.verify(tmp_path / "all")["ok"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_a_tampered_export_is_refused_by_name(exported: tuple[Path, str, dict[str, Any]],
                                              tmp_path: Path, case: dict[str, Any]) -> None:
    root, _mid, keys = exported
    copy = tmp_path / "copy"
    shutil.copytree(root / "repo", copy)
    repo = pygit2.Repository(str(copy))
    assert edits.has_body(repo)  # the tip carries a body, so body edits have one to change
    edits.apply(repo, case["edit"])
    pinned = signing.trusted_keys(keys) if case.get("pin_keys") else None
    with pytest.raises(Refused) as refused:
        verify.verify(copy, pinned)
    assert refused.value.part.startswith(case["expect"]), str(refused.value)
    assert case["reason"] in refused.value.reason, str(refused.value)
    # the command says the same, on one line, exit 1
    args = ["verify", str(copy)]
    if pinned is not None:
        keys_file = tmp_path / "keys.json"
        keys_file.write_bytes(canonical.encode(keys))
        args += ["--keys", str(keys_file)]
    done = subprocess.run(pal_command(*args), capture_output=True, text=True, check=False)
    assert done.returncode == 1 and done.stderr.startswith(f"pal: {case['expect']}")
