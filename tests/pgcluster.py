"""A throwaway PostgreSQL cluster for the tests: started on demand, removed afterwards.

The tests use Debian's ``postgresql`` package (``make test`` and ``.ci/run`` install it with
apt-get when it is missing). The server refuses to run as root, so when the tests run as root
the cluster belongs to the unprivileged ``postgres`` user the package creates; otherwise to the
user running the tests. Everything lives in one temporary directory that user owns: ``initdb``
with a random password (scram-sha-256), the server on ``127.0.0.1`` and a free port, no Unix
socket.

Run as a script, this module is the *supervisor*: it creates the cluster, prints one JSON line
(``{"dsn", "port", "version", "user", "dir"}``), and keeps the server until its standard input
closes — when the test run ends, fails, or is killed, even with SIGKILL (the pipe closes with
the process). It then stops the server and removes the directory. Should the supervisor itself
be killed, the server dies with it (parent-death signal) and the next start removes the
directory it left behind.

:func:`start` runs the supervisor and returns a :class:`Cluster`; the fixtures in
``tests/conftest.py`` start one per test session and give each test its own database.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import json
import os
import pwd
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

PREFIX = "pal-pg-"
READY_SECONDS = 60.0
_PR_SET_PDEATHSIG = 1
INSTALL_HINT = ("PostgreSQL is not installed: run `apt-get install -y postgresql` as root "
                "(`make test` does it when it runs as root), or set PAL_PG_BIN to its bin "
                "directory")


@dataclass(frozen=True)
class Cluster:
    """A running throwaway cluster and the supervisor that owns it."""

    dsn: str  # the superuser's connection string, database ``postgres``
    port: int
    version: str
    user: str  # the operating-system user the server runs as
    dir: Path
    proc: subprocess.Popen[bytes]

    def database_dsn(self, name: str) -> str:
        """The connection string of database ``name`` on this cluster."""
        return self.dsn.rsplit("/", 1)[0] + "/" + name

    def stop(self) -> None:
        """Close the supervisor's standard input and wait until it removed everything."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


def bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` (or ``$PAL_PG_BIN``).

    Raises:
        RuntimeError: PostgreSQL is not installed, with what to do.
    """
    explicit = os.environ.get("PAL_PG_BIN")
    if explicit:
        found = [explicit] if (Path(explicit) / "initdb").exists() else []
    else:
        found = [str(Path(p).parent) for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")]
    if not found:
        raise RuntimeError(INSTALL_HINT)
    return Path(max(found, key=lambda p: [int(x) for x in Path(p).parent.name.split(".")
                                          if x.isdigit()] or [0]))


def start(timeout: float = READY_SECONDS) -> Cluster:
    """Start a supervisor (this file as a script) and wait for its cluster to accept logins.

    Raises:
        RuntimeError: the cluster did not come up; the message carries the server's log.
    """
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve())],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    line = _readline(proc.stdout, timeout)
    if not line:
        proc.kill()
        proc.wait(timeout=30)
        raise RuntimeError("the PostgreSQL test cluster did not start:\n"
                           + proc.stderr.read().decode(errors="replace")[-4000:])
    info = json.loads(line)
    return Cluster(dsn=info["dsn"], port=info["port"], version=info["version"],
                   user=info["user"], dir=Path(info["dir"]), proc=proc)


def _readline(stream: IO[bytes], timeout: float) -> bytes:
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        if not sel.select(timeout):
            return b""
    return stream.readline()


# --- the supervisor ---------------------------------------------------------------------------


def _owner() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError("running as root, but there is no `postgres` user to run the "
                           "server as; " + INSTALL_HINT) from None


def _as_owner(owner: pwd.struct_passwd) -> dict[str, Any]:
    if os.geteuid() != 0:
        return {}
    return {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}


def _die_with_parent() -> None:
    # Runs in the child after the switch of user, so the setting survives into the server.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGINT)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _sweep_stale(base: Path) -> None:
    """Remove directories left by a supervisor that was itself killed."""
    for path in base.glob(PREFIX + "*"):
        try:
            pid = int((path / "supervisor.pid").read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            continue  # alive, another user's


def _wait_ready(bin_path: Path, port: int, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("postgres exited:\n" + log.read_text(errors="replace")[-4000:])
        ready = subprocess.run([str(bin_path / "pg_isready"), "-q", "-h", "127.0.0.1",
                                "-p", str(port), "-t", "2"], check=False)
        if ready.returncode == 0:
            return
        time.sleep(0.1)
    raise RuntimeError("postgres did not accept connections in time:\n"
                       + log.read_text(errors="replace")[-4000:])


def supervise() -> None:
    """Create the cluster, announce it on stdout, keep it until stdin closes, remove it."""
    bin_path = bin_dir()
    owner = _owner()
    base = Path(tempfile.gettempdir())
    _sweep_stale(base)
    top = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))
    server: subprocess.Popen[bytes] | None = None
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))  # clean up, then exit
    try:
        (top / "supervisor.pid").write_text(str(os.getpid()))
        os.chown(top, owner.pw_uid, owner.pw_gid)
        password = secrets.token_hex(16)
        pwfile = top / "pw"
        pwfile.write_text(password + "\n")
        os.chown(pwfile, owner.pw_uid, owner.pw_gid)
        pwfile.chmod(0o600)
        log = top / "postgres.log"
        env = {"PATH": "/usr/bin:/bin", "LANG": "C", "LC_ALL": "C", "TZ": "UTC"}
        init = subprocess.run(
            [str(bin_path / "initdb"), "-D", str(top / "data"), "-U", "postgres",
             "--pwfile", str(pwfile), "--auth=scram-sha-256", "--encoding=UTF8",
             "--no-locale", "--no-sync", "--no-instructions"],
            cwd=top, env=env, capture_output=True, check=False, **_as_owner(owner))
        if init.returncode != 0:
            raise RuntimeError("initdb failed:\n" + init.stderr.decode(errors="replace"))
        pwfile.unlink()
        for attempt in range(5):
            port = _free_port()
            with log.open("ab") as out:
                server = subprocess.Popen(
                    [str(bin_path / "postgres"), "-D", str(top / "data"),
                     "-c", "listen_addresses=127.0.0.1", "-c", f"port={port}",
                     "-c", "unix_socket_directories=", "-c", "max_connections=200",
                     # a throwaway cluster: durability against power loss buys nothing here
                     "-c", "fsync=off", "-c", "synchronous_commit=off",
                     "-c", "full_page_writes=off"],
                    cwd=top, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                    preexec_fn=_die_with_parent, **_as_owner(owner))  # noqa: PLW1509
            try:
                _wait_ready(bin_path, port, server, log)
                break
            except RuntimeError:
                if attempt == 4 or "could not bind" not in log.read_text(errors="replace"):
                    raise
                server.wait(timeout=30)  # the port was taken meanwhile: another one
        version = subprocess.run([str(bin_path / "postgres"), "--version"], capture_output=True,
                                 text=True, check=True).stdout.strip()
        sys.stdout.write(json.dumps({
            "dsn": f"postgresql://postgres:{password}@127.0.0.1:{port}/postgres",
            "port": port, "version": version, "user": owner.pw_name, "dir": str(top)}) + "\n")
        sys.stdout.flush()
        with contextlib.suppress(OSError):
            while sys.stdin.buffer.read(4096):
                pass  # the parent never writes; EOF means it is done or gone
    finally:
        if server is not None and server.poll() is None:
            server.send_signal(signal.SIGINT)  # fast shutdown: disconnect clients, stop
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=30)
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    try:
        supervise()
    except RuntimeError as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(1)
