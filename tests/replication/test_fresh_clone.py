"""Publication and the fresh-clone flow (requirements 000 "Select and synchronize", §20.4)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import INTEROP
from tests.replication.helpers import (
    ALICE_STREAM,
    BOB_STREAM,
    clone,
    fixture_remote,
    git,
    pal,
    refs,
)


def _recall(work: Path, *extra: str) -> dict[str, object]:
    done = pal("memory", "recall", "--json", *extra, cwd=work)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_fixture_clone_recalls_what_the_fixture_recalls(tmp_path: Path) -> None:
    remote = fixture_remote(tmp_path / "remote.git")
    work = clone(f"file://{remote}", tmp_path / "clone")
    before = pal("memory", "recall", "--json", cwd=work)
    assert before.returncode == 0, before.stderr
    assert json.loads(before.stdout)["memories"] == []
    pal("replication", "select", "--memory", ALICE_STREAM, "--memory", BOB_STREAM, cwd=work)
    assert pal("sync", cwd=work).returncode == 0
    rebuilt = pal("memory", "index", "rebuild", cwd=work)
    assert rebuilt.returncode == 0, rebuilt.stderr
    for name, args in (
        ("recall-default.json", ()),
        ("recall-include-untrusted-all.json", ("--include-untrusted", "--lifecycle", "all")),
        ("recall-query-stream-isolation.json", ("--query", "Stream isolation")),
    ):
        expected = json.loads((INTEROP / name).read_text())
        got = _recall(work, *args)
        assert got["memories"] == expected["memories"], name
        assert got["matched"] == expected["matched"]


def _publisher(tmp_path: Path) -> tuple[Path, Path, str, str]:
    remote = tmp_path / "remote.git"
    git("init", "--bare", "-q", "-b", "main", str(remote))
    pub = tmp_path / "publisher"
    git("init", "-q", "-b", "main", str(pub))
    (pub / "README.md").write_text("project\n")
    git("add", "README.md", cwd=pub)
    git("commit", "-q", "-m", "base", cwd=pub)
    git("remote", "add", "origin", f"file://{remote}", cwd=pub)
    git("push", "-q", "origin", "main", cwd=pub)
    done = pal("id", "init", "--name", "Pat Publisher", "--json", cwd=pub)
    assert done.returncode == 0, done.stderr
    recorded = pal("memory", "record", "--kind", "decision", "--at", "HEAD", "--applies",
                   "descendants", "--topic", "architecture", "--content",
                   "Replicate memory through a quarantine.", "--json", cwd=pub)  # fmt: skip
    assert recorded.returncode == 0, recorded.stderr
    first = json.loads(recorded.stdout)
    again = pal("memory", "supersede", first["memoryId"], "--kind", "decision", "--at", "HEAD",
                "--applies", "descendants", "--topic", "architecture", "--content",
                "Replicate memory through a quarantine, then promote atomically.", "--json",
                cwd=pub)  # fmt: skip
    assert again.returncode == 0, again.stderr
    return pub, remote, first["stream"], first["actor"]


def test_publish_then_fresh_clone_recalls_like_the_publisher(tmp_path: Path) -> None:
    pub, remote, stream, actor = _publisher(tmp_path)
    pushed_main = git("rev-parse", "main", cwd=pub).strip()
    (pub / "later.md").write_text("not published\n")
    git("add", "later.md", cwd=pub)
    git("commit", "-q", "-m", "local only", cwd=pub)
    local_ref = f"refs/hn/memory/{actor}/{stream.removeprefix('sha256:')}"

    done = pal("sync", "--json", cwd=pub)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["published"] == [{"ref": local_ref, "status": "published", "diagnostic": ""}]
    assert refs(remote, "refs/hn/") == refs(pub, "refs/hn/memory/")
    assert git("rev-parse", "main", cwd=remote).strip() == pushed_main  # primary never pushed
    again = json.loads(pal("sync", "--json", cwd=pub).stdout)
    assert again["published"][0]["status"] == "up-to-date"

    work = clone(f"file://{remote}", tmp_path / "clone")
    assert pal("replication", "select", "--memory", stream, cwd=work).returncode == 0
    synced = pal("sync", cwd=work)
    assert synced.returncode == 0, synced.stderr
    assert pal("memory", "index", "rebuild", cwd=work).returncode == 0
    assert pal("memory", "index", "rebuild", cwd=pub).returncode == 0
    wide = ("--include-untrusted", "--lifecycle", "all")
    ours, theirs = _recall(work, *wide), _recall(pub, "--at", pushed_main, *wide)
    assert ours["memories"] == theirs["memories"]
    assert len(ours["memories"]) == 2  # type: ignore[arg-type]

    # The clone holds no private key of the publisher and cannot author as Pat.
    key_doc = json.loads((pub / ".git/hn/identities" / f"{actor}.json").read_text())
    secret = key_doc["privateKey"].encode()
    for path in work.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret not in data and secret[:43] not in data, path
    assert not (work / ".git/hn/identities").exists()
    denied = pal("memory", "record", "--kind", "decision", "--at", "HEAD", "--applies", "exact",
                 "--content", "forged", cwd=work)  # fmt: skip
    assert denied.returncode == 1


def test_publication_is_never_forced(tmp_path: Path) -> None:
    pub, remote, stream, actor = _publisher(tmp_path)
    assert pal("sync", cwd=pub).returncode == 0
    ref = f"refs/hn/memory/{actor}/{stream.removeprefix('sha256:')}"
    # someone rewrites the published ref on the remote to an unrelated commit
    other = git("rev-parse", "main", cwd=remote).strip()
    git("update-ref", ref, other, cwd=remote)
    more = pal("memory", "record", "--kind", "observation", "--at", "HEAD", "--applies",
               "exact", "--content", "third", cwd=pub)  # fmt: skip
    assert more.returncode == 0, more.stderr
    done = pal("sync", "--json", cwd=pub)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["published"][0]["status"] == "rejected"
    assert git("rev-parse", ref, cwd=remote).strip() == other
