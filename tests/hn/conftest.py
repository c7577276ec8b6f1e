"""Fixtures for repo-memory tests: the upstream interop repository and the fixed identities."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from palimpsest.identity import Identity, identity_from_seed
from tests.conftest import INTEROP

ALICE_SEED = bytes(range(32))
BOB_SEED = bytes(range(32, 64))


def git_env(home: Path) -> dict[str, str]:
    """A scrubbed environment for git subprocesses started outside a test's monkeypatch."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=str(home / ".gitconfig"),
        GIT_AUTHOR_NAME="Test",
        GIT_AUTHOR_EMAIL="test@example.invalid",
        GIT_COMMITTER_NAME="Test",
        GIT_COMMITTER_EMAIL="test@example.invalid",
        TZ="UTC",
    )
    return env


def unpack_fixture(target: Path, home: Path) -> Path:
    """Unpack fixture.bundle with every ref, as the interop README §9 says."""
    env = git_env(home)
    repo = target / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    bundle = str(INTEROP / "fixture.bundle")
    run = ["git", "-C", str(repo)]
    subprocess.run(
        [*run, "fetch", "-q", "--update-head-ok", bundle, "refs/*:refs/*"], check=True, env=env
    )
    subprocess.run([*run, "symbolic-ref", "HEAD", "refs/heads/main"], check=True, env=env)
    subprocess.run([*run, "reset", "-q", "--hard"], check=True, env=env)
    return repo


@pytest.fixture(scope="session")
def pristine_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture repository, unpacked once per session; never modify it."""
    base = tmp_path_factory.mktemp("interop")
    home = tmp_path_factory.mktemp("interop-home")
    return unpack_fixture(base, home)


@pytest.fixture
def fixture_repo(pristine_fixture: Path, tmp_path: Path) -> Path:
    """A private copy of the fixture repository that a test may change."""
    dest = tmp_path / "repo"
    shutil.copytree(pristine_fixture, dest, symlinks=True)
    return dest


@pytest.fixture(scope="session")
def interop_memories() -> list[dict[str, Any]]:
    """memories.json: the nine upstream memories with exact bytes."""
    data: list[dict[str, Any]] = json.loads((INTEROP / "memories.json").read_text("utf-8"))
    return data


@pytest.fixture(scope="session")
def alice() -> Identity:
    return identity_from_seed("Alice Agent", ALICE_SEED)


@pytest.fixture(scope="session")
def bob() -> Identity:
    return identity_from_seed("Bob Agent", BOB_SEED)
