"""The PostgreSQL test cluster: a real server, unprivileged, on loopback, used, and gone after.

These tests prove the fixture the service suite parametrises over (``backend`` in
tests/conftest.py) starts a real PostgreSQL, hands out an empty database per test, and leaves
nothing behind — also when the test run is killed with SIGKILL.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from tests import pgcluster
from tests.conftest import BOTH, REPO_ROOT, Backend

pytestmark = pytest.mark.postgres
BACKENDS = BOTH


def _uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _until(condition: object, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.1)
    return False


def test_the_server_runs_unprivileged_on_loopback_and_is_used(
        postgres_cluster: pgcluster.Cluster, postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        addr, data_dir, backend_pid, db = conn.execute(
            "SELECT inet_server_addr()::text, current_setting('data_directory'), "
            "pg_backend_pid(), current_database()").fetchone() or (None,) * 4
        assert addr == "127.0.0.1/32"
        assert Path(data_dir).is_relative_to(postgres_cluster.dir)
        assert _uid_of(backend_pid) != 0  # PostgreSQL refuses root; the fixture obeys
        assert db.startswith("t_")
        # a fresh database: nothing of another test is visible
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname='public'")
        assert tables.fetchone() == (0,)
        conn.execute("CREATE TABLE probe (id int PRIMARY KEY, body text NOT NULL)")
        conn.execute("INSERT INTO probe VALUES (1, 'kept')")
        assert conn.execute("SELECT body FROM probe").fetchall() == [("kept",)]
    listen = subprocess.run(["ss", "-Hltn", f"sport = :{postgres_cluster.port}"],
                            capture_output=True, text=True, check=False).stdout
    if listen:  # ss is in iproute2; where present, the only listener is loopback
        assert all(" 127.0.0.1:" in line for line in listen.strip().splitlines()), listen


def test_a_password_is_required(postgres_cluster: pgcluster.Cluster) -> None:
    wrong = postgres_cluster.dsn.replace("postgres:", "postgres:x", 1)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong).close()


def test_backend_fixture_names_each_store(backend: Backend) -> None:
    assert backend.name in ("sqlite", "postgresql")
    if backend.name == "sqlite":
        assert backend.database_url is None
        return
    assert backend.database_url is not None
    with psycopg.connect(backend.database_url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


_KILLED_RUN = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from tests import pgcluster
c = pgcluster.start()
print(c.dir, c.port, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_killed_test_run_leaves_no_cluster_behind() -> None:
    run = subprocess.run([sys.executable, "-c", _KILLED_RUN, str(REPO_ROOT)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == -9, run.stderr
    top, port = run.stdout.split()
    assert _until(lambda: not Path(top).exists()), f"{top} survived the killed run"
    assert not _accepts(int(port))


def test_killed_supervisor_takes_the_server_along_and_is_swept() -> None:
    cluster = pgcluster.start()
    try:
        assert _accepts(cluster.port)
        cluster.proc.kill()  # SIGKILL: no clean-up code runs in the supervisor
        cluster.proc.wait(timeout=30)
        assert _until(lambda: not _accepts(cluster.port)), "the server outlived its supervisor"
        assert cluster.dir.exists()
        pgcluster.start().stop()  # the next start removes what the killed one left
        assert not cluster.dir.exists()
    finally:
        cluster.stop()


def test_missing_postgresql_says_how_to_install(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setenv("PAL_PG_BIN", str(tmp_path))  # no initdb there
    with pytest.raises(RuntimeError, match="apt-get install -y postgresql"):
        pgcluster.bin_dir()
