"""Shared test set-up: a scrubbed Git environment, the interop vectors kept in the repository,
and a throwaway PostgreSQL cluster with one fresh database per test that asks for one."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import pgcluster

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


# --- PostgreSQL (tests/pgcluster.py) ------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[pgcluster.Cluster]:
    """One throwaway PostgreSQL cluster for the whole run, started on first use and removed
    at the end (also when the run fails or is killed)."""
    cluster = pgcluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_dsn(postgres_cluster: pgcluster.Cluster) -> Iterator[str]:
    """A fresh, empty database on the test cluster for one test; dropped afterwards."""
    import psycopg  # only tests that use PostgreSQL pay for the import

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_cluster.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_cluster.database_dsn(name)
    finally:
        with psycopg.connect(postgres_cluster.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass(frozen=True)
class Backend:
    """Where a test's service keeps its data: ``database_url`` is ``None`` for the embedded
    SQLite store, else a PostgreSQL connection string (files and keys stay in ``data_dir``)."""

    name: str
    data_dir: Path
    database_url: str | None


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each storage backend in turn: a test that takes this fixture runs once per backend."""
    url = request.getfixturevalue("postgres_dsn") if request.param == "postgresql" else None
    return Backend(request.param, tmp_path / "data", url)
