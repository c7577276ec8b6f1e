"""Helpers for recall, grep and index tests: small real repositories with signed memories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pygit2

from palimpsest.hn import store
from palimpsest.hn.author import append, build_record
from palimpsest.hn.envelope import Anchor, Handoff, VerifiedMemory
from palimpsest.identity import Identity, identity_from_seed

CAROL = identity_from_seed("Carol Agent", bytes(range(64, 96)))


def policy_bytes(actors: list[str], kinds: list[str] | None = None) -> bytes:
    """A valid hn.policy/0 document trusting ``actors`` for ``kinds`` (default: all six)."""
    doc = {
        "version": "hn.policy/0",
        "maintainers": sorted(actors)[:1] or ["0" * 64],
        "proposals": {
            "requiredApprovals": 0,
            "requiredAccepts": 1,
            "trustedReviewers": [],
            "allowAuthorApproval": False,
        },
        "pipelines": {},
        "memory": {
            "trustedActors": sorted(actors),
            "trustedKinds": sorted(
                kinds
                or ["assumption", "attempt", "decision", "handoff", "observation", "verification"]
            ),
        },
    }
    return json.dumps(doc).encode()


def commit_files(repo: pygit2.Repository, files: dict[str, bytes], message: str) -> str:
    """Commit ``files`` (path -> bytes, nested paths allowed) on top of HEAD; return the ID."""
    parents = [] if repo.head_is_unborn else [repo.head.target]
    index = pygit2.Index()
    if parents:
        index.read_tree(repo[parents[0]].tree)  # type: ignore[attr-defined]
    for path, data in files.items():
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
    tree = index.write_tree(repo)
    who = pygit2.Signature("Test", "test@example.invalid", 1_700_000_000, 0)
    oid = repo.create_commit("HEAD", who, who, message, tree, parents)
    return str(oid)


def new_repo(path: Path, trusted: list[Identity] | None = None) -> pygit2.Repository:
    """A repository with a README and (unless ``trusted`` is None) a policy trusting them."""
    repo = pygit2.init_repository(str(path), initial_head="main")
    files = {"README.md": b"hello\n"}
    if trusted is not None:
        files[".hn/policy.json"] = policy_bytes([i.actor for i in trusted])
    commit_files(repo, files, "base")
    return repo


def remember(
    repo: pygit2.Repository,
    who: Identity,
    content: str = "a memory",
    *,
    kind: str = "observation",
    topics: tuple[str, ...] = (),
    evidence: tuple[str, ...] = (),
    applies: str = "descendants",
    stream: str = "",
    timestamp: str | None = None,
    handoff: Handoff | None = None,
    outcome: str = "",
    operation: str = "record",
    target: str = "",
) -> VerifiedMemory:
    """Append one signed record (or supersede) anchored at HEAD."""
    anchor = Anchor(commit=str(repo.head.target))
    if kind == "handoff" and handoff is None:
        handoff = Handoff()
    record = build_record(
        kind=kind,
        content=content,
        anchor=anchor,
        applies=applies,
        topics=topics,
        evidence=evidence,
        outcome=outcome,
        handoff=handoff,
    )
    return append(
        repo,
        who,
        operation=operation,
        stream=stream,
        record=record,
        target=target,
        timestamp=timestamp,
    )


def lifecycle(
    repo: pygit2.Repository,
    who: Identity,
    operation: str,
    target: str,
    *,
    reason: str = "incorrect",
    stream: str = "",
    timestamp: str | None = None,
) -> VerifiedMemory:
    """Append a retract or challenge."""
    return append(
        repo, who, operation=operation, target=target, reason=reason, stream=stream,
        timestamp=timestamp,
    )  # fmt: skip


def pal(repo: Path | str, *args: str | bytes, env: dict[str, str] | None = None) -> Any:
    """Run ``pal memory --repo REPO ARGS`` in a real process; return the CompletedProcess."""
    argv: list[str | bytes] = [sys.executable, "-m", "palimpsest.cli.main", "memory"]
    argv += ["--repo", str(repo), *args]
    run_env = dict(os.environ)
    if env:
        run_env.update(env)
    return subprocess.run(argv, capture_output=True, env=run_env, check=False, timeout=120)


def head(repo: pygit2.Repository) -> str:
    """The full HEAD commit ID."""
    return store.resolve_commit(repo, "HEAD")
