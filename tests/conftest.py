"""Shared test set-up: a scrubbed Git environment and the interop vectors kept in the repository."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# The upstream hn-memory/0 interop fixture, copied byte for byte (see tests/vectors/README.md):
# the tests carry their own vectors, so a fresh clone tests itself.
VECTORS = REPO_ROOT / "tests" / "vectors"
INTEROP = VECTORS / "hn-memory-v0"


@pytest.fixture(autouse=True)
def _scrubbed_git_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Every test sees no inherited GIT_* variables, no global or system Git config, a fixed
    identity for plumbing commits and a private HOME."""
    for name in list(os.environ):
        if name.startswith("GIT_"):
            monkeypatch.delenv(name, raising=False)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")
    monkeypatch.setenv("TZ", "UTC")
    yield
