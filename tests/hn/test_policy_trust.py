"""``pal memory policy trust``: the memory section of .hn/policy.json, and nothing else."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pygit2
import pytest

from palimpsest.hn.policy import parse_policy, trusting
from palimpsest.identity import Identity, save_identity
from tests.hn.recall_helpers import commit_files, head, new_repo, pal, policy_bytes, remember


def _refs(repo: pygit2.Repository) -> dict[str, str]:
    return {name: str(repo.references[name].target) for name in repo.references}


def test_trust_creates_a_policy_that_makes_recall_qualify(tmp_path: Path, alice: Identity) -> None:
    repo = new_repo(tmp_path / "repo", trusted=None)  # no policy: nothing qualifies
    save_identity(Path(repo.path), alice)
    memory = remember(repo, alice, "a decision", kind="decision")
    assert json.loads(pal(repo.workdir, "recall", "--json").stdout)["matched"] == 0
    refs, head_before = _refs(repo), head(repo)
    done = pal(repo.workdir, "policy", "trust", "--kind", "decision", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "version": 0, "path": ".hn/policy.json", "trustedActors": [alice.actor],
        "trustedKinds": ["decision"],
    }  # fmt: skip
    path = Path(repo.workdir) / ".hn" / "policy.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert parse_policy(path.read_bytes()) is not None
    assert _refs(repo) == refs and head(repo) == head_before  # a file to commit, nothing else
    commit_files(repo, {".hn/policy.json": path.read_bytes()}, "memory policy")
    page = json.loads(pal(repo.workdir, "recall", "--json").stdout)
    assert [m["id"] for m in page["memories"]] == [memory.memory_id]


def test_trust_merges_sorted_unique_and_keeps_every_other_field(
    tmp_path: Path, alice: Identity, bob: Identity
) -> None:
    original = json.loads(policy_bytes([bob.actor], ["observation"]))
    original["pipelines"] = {"ci": {"kept": True}}
    data = trusting(json.dumps(original).encode(), [alice.actor, bob.actor],
                    ["decision", "observation"], maintainer=alice.actor)  # fmt: skip
    doc = json.loads(data)
    assert list(doc) == ["version", "maintainers", "proposals", "pipelines", "memory"]
    assert doc["pipelines"] == {"ci": {"kept": True}}
    assert doc["maintainers"] == original["maintainers"]
    assert doc["memory"] == {
        "trustedActors": sorted([alice.actor, bob.actor]),
        "trustedKinds": ["decision", "observation"],
    }
    assert trusting(data, [alice.actor], ["decision"], maintainer=alice.actor) == data
    assert data.endswith(b"}\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "secret"], "unknown kind"),
        (["--kind", "decision", "--actor", "ABC"], "full 64-hex actor IDs"),
        ([], "Missing option '--kind'"),
    ],
)
def test_trust_refusals_write_nothing(
    tmp_path: Path, alice: Identity, args: list[str], message: str
) -> None:
    repo = new_repo(tmp_path / "repo", trusted=None)
    save_identity(Path(repo.path), alice)
    refused = pal(repo.workdir, "policy", "trust", *args)
    assert refused.returncode == 1 and message in refused.stderr.decode()
    assert refused.stderr.decode().startswith("pal: ")
    assert not (Path(repo.workdir) / ".hn").exists()


def test_an_invalid_policy_is_not_extended(tmp_path: Path, alice: Identity) -> None:
    repo = new_repo(tmp_path / "repo", trusted=None)
    save_identity(Path(repo.path), alice)
    path = Path(repo.workdir) / ".hn" / "policy.json"
    path.parent.mkdir()
    path.write_bytes(b'{"version": "hn.policy/0", "extra": 1}')
    refused = pal(repo.workdir, "policy", "trust", "--kind", "all")
    assert refused.returncode == 1 and b"invalid policy" in refused.stderr
    assert path.read_bytes() == b'{"version": "hn.policy/0", "extra": 1}'


def test_a_symlinked_policy_is_refused(tmp_path: Path, alice: Identity) -> None:
    repo = new_repo(tmp_path / "repo", trusted=None)
    save_identity(Path(repo.path), alice)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (Path(repo.workdir) / ".hn").mkdir()
    (Path(repo.workdir) / ".hn" / "policy.json").symlink_to(victim)
    refused = pal(repo.workdir, "policy", "trust", "--kind", "all")
    assert refused.returncode == 1 and b"symlink" in refused.stderr
    assert victim.read_bytes() == b"precious"
