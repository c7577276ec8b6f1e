"""Shared test set-up: a scrubbed Git environment, the interop vectors kept in the repository,
and a throwaway PostgreSQL cluster with one fresh database per test that asks for one."""

from __future__ import annotations

import contextlib
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

    def serve_args(self) -> tuple[str, ...]:
        """The extra ``pal serve`` arguments that choose this store."""
        return ("--database", self.database_url) if self.database_url else ()


# The store backends a test module runs on: a module that exercises the store says
# ``BACKENDS = BOTH``; every other one runs on the embedded store only (the suite's budget).
BOTH = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test that takes ``backend_name`` (through ``backend`` / ``module_backend``) runs
    once per backend its module lists in ``BACKENDS`` (default: SQLite only)."""
    if "backend_name" in metafunc.fixturenames:
        names = getattr(metafunc.module, "BACKENDS", ("sqlite",))
        metafunc.parametrize(
            "backend_name",
            [pytest.param(n, marks=pytest.mark.postgres) if n == "postgresql" else n
             for n in names], scope="module")


@pytest.fixture(scope="session")
def pal_template(postgres_cluster: pgcluster.Cluster) -> str:
    """A database holding the store's schema, copied for every test that uses PostgreSQL
    (``CREATE DATABASE … TEMPLATE``: cheaper than applying the schema each time)."""
    import psycopg

    from palimpsest.service.storage.postgres import migrate_schema

    name = f"pal_template_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_cluster.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    migrate_schema(postgres_cluster.database_dsn(name))
    return name


@contextlib.contextmanager
def _store_database(cluster: pgcluster.Cluster, template: str) -> Iterator[str]:
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield cluster.database_dsn(name)
    finally:
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def _backend(request: pytest.FixtureRequest, name: str, data_dir: Path) -> Iterator[Backend]:
    if name == "sqlite":
        yield Backend(name, data_dir, None)
        return
    cluster = request.getfixturevalue("postgres_cluster")
    with _store_database(cluster, request.getfixturevalue("pal_template")) as url:
        yield Backend(name, data_dir, url)


@pytest.fixture
def backend(request: pytest.FixtureRequest, backend_name: str, tmp_path: Path
            ) -> Iterator[Backend]:
    """Each storage backend of the module in turn, a fresh store for each test."""
    with _backend(request, backend_name, tmp_path / "data") as made:
        yield made


@pytest.fixture(scope="module")
def module_backend(request: pytest.FixtureRequest, backend_name: str,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """Each storage backend of the module in turn, one store for the module's tests."""
    with _backend(request, backend_name, tmp_path_factory.mktemp("store") / "data") as made:
        yield made
