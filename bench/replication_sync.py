"""Benchmark: `pal sync` of many streams against the raw Git transport of the same refs.

Builds a bare remote with STREAMS actors × ENTRIES signed memories each, then measures, in one
run on this machine:

- ``git_fetch``: a plain ``git fetch`` of every memory ref into a fresh repository (the baseline:
  pure transport, no verification);
- ``sync_first``: the first ``replication.sync`` into a fresh clone (quarantine, measurement,
  full verification of every signature and relationship, promotion);
- ``sync_noop``: a second sync with nothing new (advertisement only);
- ``sync_incremental``: a sync after one more entry was appended to every stream.

Prints one JSON object.  Usage: ``python bench/replication_sync.py [STREAMS] [ENTRIES]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pygit2

from palimpsest.hn import replication
from palimpsest.hn.envelope import (
    PROTOCOL,
    Anchor,
    Applicability,
    Envelope,
    Record,
    default_stream,
    encode_envelope,
    memory_id,
    sign_text,
)
from palimpsest.hn.store import local_ref_name, write_memory_objects
from palimpsest.identity import Identity, identity_from_seed


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _append(repo: pygit2.Repository, who: Identity, base: str, sequence: int,
            previous: tuple[str, str] | None) -> tuple[str, str]:  # fmt: skip
    envelope = Envelope(
        protocol=PROTOCOL, operation="record", actor=who.actor, actor_name=who.name,
        public_key=who.public_key_text, stream=default_stream(who.actor), sequence=sequence,
        timestamp=f"2026-09-01T10:00:{sequence % 60:02d}Z",
        previous=previous[0] if previous else "",
        record=Record(kind="observation", content=f"{who.name} observation {sequence} " * 8,
                      anchor=Anchor(commit=base), applicability=Applicability(mode="exact"),
                      topics=("bench",)),
    )  # fmt: skip
    payload = encode_envelope(envelope)
    head = write_memory_objects(
        repo, payload, sign_text(who.sign(payload)), author=who.name, actor=who.actor,
        timestamp=envelope.timestamp, parent=previous[1] if previous else None,
    )  # fmt: skip
    return memory_id(payload), head


def main() -> None:
    streams = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    entries = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    for key in [k for k in os.environ if k.startswith("GIT_")]:
        del os.environ[key]
    os.environ.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
                      GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b.invalid",
                      GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b.invalid")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        remote = pygit2.init_repository(str(root / "remote.git"), bare=True)
        blob = remote.create_blob(b"bench\n")
        tree = remote.TreeBuilder()
        tree.insert("README.md", blob, pygit2.enums.FileMode.BLOB)
        person = pygit2.Signature("b", "b@b.invalid", 1788260400, 0)
        base = str(remote.create_commit("refs/heads/main", person, person, "base\n",
                                        tree.write(), []))  # fmt: skip
        remote.set_head("refs/heads/main")
        people = [identity_from_seed(f"Actor {i}", bytes([i + 1] * 32)) for i in range(streams)]
        heads: dict[str, tuple[str, str]] = {}
        for who in people:
            last = None
            for sequence in range(1, entries + 1):
                last = _append(remote, who, base, sequence, last)
            assert last is not None
            heads[who.actor] = last
            ref = local_ref_name(who.actor, default_stream(who.actor))
            remote.references.create(ref, pygit2.Oid(hex=last[1]), force=True)
        url = f"file://{root / 'remote.git'}"

        plain = root / "plain"
        _git("init", "-q", "--bare", str(plain), cwd=root)
        start = time.perf_counter()
        _git("fetch", "-q", url, "refs/hn/memory/*:refs/hn/memory/*", cwd=plain)
        git_fetch = time.perf_counter() - start

        _git("clone", "-q", url, str(root / "clone"), cwd=root)
        start = time.perf_counter()
        first = replication.sync(root / "clone", "origin", publish=False)
        sync_first = time.perf_counter() - start
        assert all(m.status == "promoted" for m in first.memories), first.to_json()

        start = time.perf_counter()
        replication.sync(root / "clone", "origin", publish=False)
        sync_noop = time.perf_counter() - start

        for who in people:
            heads[who.actor] = _append(remote, who, base, entries + 1, heads[who.actor])
            ref = local_ref_name(who.actor, default_stream(who.actor))
            remote.references.create(ref, pygit2.Oid(hex=heads[who.actor][1]), force=True)
        start = time.perf_counter()
        third = replication.sync(root / "clone", "origin", publish=False)
        sync_incremental = time.perf_counter() - start
        assert all(m.status == "promoted" and not m.unchanged for m in third.memories)

    print(json.dumps({
        "benchmark": "replication_sync",
        "streams": streams,
        "entriesPerStream": entries,
        "memories": streams * entries,
        "seconds": {
            "git_fetch": round(git_fetch, 3),
            "sync_first": round(sync_first, 3),
            "sync_noop": round(sync_noop, 3),
            "sync_incremental": round(sync_incremental, 3),
        },
        "syncFirstOverGitFetch": round(sync_first / git_fetch, 1),
        "verifiedMemoriesPerSecond": round(streams * entries / sync_first),
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
