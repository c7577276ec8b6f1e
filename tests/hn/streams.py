"""Build memory streams and hostile Git objects directly with pygit2 for store tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pygit2

from palimpsest.canonical import encode
from palimpsest.hn import store
from palimpsest.hn.envelope import default_stream, memory_id, sign_text
from palimpsest.identity import Identity
from tests.hn.helpers import ALICE

COMMIT = pygit2.enums.ObjectType.COMMIT
TREE = pygit2.enums.ObjectType.TREE


def new_repo(path: Path, *, bare: bool = False) -> pygit2.Repository:
    """A fresh repository with one base commit on main."""
    repo = pygit2.init_repository(str(path), bare=bare, initial_head="main")
    blob = repo.create_blob(b"hello\n")
    builder = repo.TreeBuilder()
    builder.insert("README.md", blob, pygit2.enums.FileMode.BLOB)
    who = pygit2.Signature("Base", "base@example.invalid", 1_700_000_000, 0)
    repo.create_commit("refs/heads/main", who, who, "base\n", builder.write(), [])
    return repo


def head_commit(repo: pygit2.Repository) -> str:
    return str(repo.references["refs/heads/main"].target)


def record_wire(
    identity: Identity,
    sequence: int,
    previous: str,
    anchor: str,
    *,
    content: str = "note",
    stream: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "protocol": "hn-memory/0",
        "operation": "record",
        "actor": identity.actor,
        "actorName": identity.name,
        "publicKey": identity.public_key_text,
        "stream": stream or default_stream(identity.actor),
        "sequence": sequence,
        "timestamp": f"2026-08-30T12:00:{sequence % 60:02d}Z",
    }
    if previous:
        wire["previous"] = previous
    wire["record"] = {
        "kind": "observation",
        "content": content,
        "anchor": {"commit": anchor},
        "applicability": {"mode": "descendants"},
        "topics": [],
        "evidence": [],
    }
    wire.update(extra)
    return wire


def raw_tree(repo: pygit2.Repository, entries: list[tuple[str, str, pygit2.Oid]]) -> pygit2.Oid:
    """Write a literal tree object (allows duplicates and odd modes)."""
    data = b"".join(
        mode.encode() + b" " + name.encode() + b"\0" + oid.raw for mode, name, oid in entries
    )
    return repo.odb.write(TREE, data)


def raw_commit(repo: pygit2.Repository, tree: pygit2.Oid | str, parents: list[str]) -> str:
    """Write a literal commit object (parents need not exist)."""
    lines = [f"tree {tree}"] + [f"parent {p}" for p in parents]
    lines += ["author A <a@hn.invalid> 0 +0000", "committer A <a@hn.invalid> 0 +0000", "", "m", ""]
    return str(repo.odb.write(COMMIT, "\n".join(lines).encode()))


def memory_tree(repo: pygit2.Repository, payload: bytes, signature: bytes) -> pygit2.Oid:
    return raw_tree(
        repo,
        [
            ("100644", "memory.json", repo.create_blob(payload)),
            ("100644", "signature", repo.create_blob(signature)),
        ],
    )


def append_raw(
    repo: pygit2.Repository, wire: dict[str, Any], parents: list[str], identity: Identity = ALICE
) -> tuple[str, str]:
    """Sign ``wire`` and write its commit; return (commit, memory ID)."""
    payload = encode(wire)
    signature = sign_text(identity.sign(payload)).encode()
    return raw_commit(repo, memory_tree(repo, payload, signature), parents), memory_id(payload)


def build_stream(
    repo: pygit2.Repository, identity: Identity, count: int, *, stream: str | None = None
) -> tuple[str, list[str]]:
    """A valid stream of ``count`` records; sets its local ref; returns (ref, memory IDs)."""
    anchor = head_commit(repo)
    parent: list[str] = []
    previous = ""
    ids: list[str] = []
    for seq in range(1, count + 1):
        wire = record_wire(identity, seq, previous, anchor, stream=stream, content=f"n{seq}")
        commit, previous = append_raw(repo, wire, parent, identity)
        parent = [commit]
        ids.append(previous)
    name = store.local_ref_name(identity.actor, stream or default_stream(identity.actor))
    repo.references.create(name, pygit2.Oid(hex=parent[0]), force=True)
    return name, ids


def ref_snapshot(repo: pygit2.Repository) -> dict[str, str]:
    return {name: str(repo.references[name].target) for name in repo.references}
