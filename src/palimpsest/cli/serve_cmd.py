"""``pal serve``: run the memory service (UHP Memories over HTTP) on a data directory.

The data directory holds the embedded SQLite store (WAL) and the content-addressed file bytes.
On the first start the store is empty: an owner member is created and its credential printed
**once** (it is stored only as a hash). Binding to an address other than loopback is refused
unless credentials were configured beforehand (``pal admin credential create`` or an earlier
loopback start): a public listener never mints and prints a secret.

With ``--json`` the command prints one JSON line once the socket is listening — ``{"url", "host",
"port", "data_dir", "owner"?}`` — so a test or a supervisor can start it on ``--port 0``.

Settings come from flags, environment variables and ``--config FILE`` (:mod:`.serve_config`).
With ``--log-level info`` every request is logged as one JSON line on stderr (the
``palimpsest.access`` logger); ``--tracing`` exports OpenTelemetry spans.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import click
import uvicorn

from palimpsest import canonical
from palimpsest.api.app import ApiConfig, create_app
from palimpsest.api.guard import LOOPBACK_HOSTS, GuardConfig
from palimpsest.api.telemetry import tracing as tracing_mod
from palimpsest.cli import serve_config
from palimpsest.cli.datadir import default_data_dir, is_loopback
from palimpsest.cli.serve_workers import ACCEPT_BATCH, SharedListener, Supervisor
from palimpsest.errors import InvalidInput
from palimpsest.service.memories import MemoryService
from palimpsest.text import safe_text

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "command", "default_data_dir", "is_loopback"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
GRACEFUL_SECONDS = 25  # in-flight requests get this long to finish on SIGTERM


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the
    # listening socket says so, and without it every keep-alive response waits for a
    # delayed ACK (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror}",
                           code="bind-failed") from exc
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


@click.command("serve")
@click.option("--config", "config", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              envvar="PAL_CONFIG", default=None,
              help="TOML file of settings ($PAL_CONFIG); flags and environment override it.")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              envvar="PAL_DATA_DIR",
              help="Data directory (default: $PAL_DATA_DIR or ~/.local/share/palimpsest/service).")
@click.option("--host", default=None, envvar="PAL_HOST",
              help=f"Address to listen on (default {DEFAULT_HOST}).")
@click.option("--port", type=click.IntRange(0, 65535), default=None, envvar="PAL_PORT",
              help=f"Port, 0 picks a free one (default {DEFAULT_PORT}).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, envvar="PAL_ALLOWED_HOSTS",
              help="Host header names to answer for, besides loopback names (repeatable).")
@click.option("--log-level", type=click.Choice(serve_config.LOG_LEVELS), default=None,
              envvar="PAL_LOG_LEVEL",
              help="warning by default; info adds a JSON access-log line per request.")
@click.option("--durability", type=click.Choice(serve_config.DURABILITY), default=None,
              envvar="PAL_DURABILITY", help="full: an fsync per write (default normal).")
@click.option("--tracing", type=click.Choice(serve_config.TRACING), default=None,
              envvar="PAL_TRACING", help="Export OpenTelemetry spans (default none).")
@click.option("--database", default=None, envvar="PAL_DATABASE_URL",
              help="postgresql:// URL: keep the store on PostgreSQL ($PAL_DATABASE_URL; "
              "default: the embedded SQLite store in the data directory).")
@click.option("--workers", type=click.IntRange(1, serve_config.MAX_WORKERS), default=None,
              envvar="PAL_WORKERS",
              help="Server processes sharing the socket and the store (default 1).")
@click.option("--write-wait", type=click.FloatRange(0, serve_config.MAX_WRITE_WAIT,
                                                     min_open=True), default=None,
              envvar="PAL_WRITE_WAIT",
              help="Seconds a write waits for other writers before 503 + Retry-After "
              "(default 5).")
@click.option("--json", "as_json", is_flag=True, help="Print the start-up line as JSON.")
def command(*, config: Path | None, data_dir: Path | None, host: str | None, port: int | None,
            allowed_hosts: tuple[str, ...], log_level: str | None, durability: str | None,
            tracing: str | None, database: str | None, workers: int | None,
            write_wait: float | None, as_json: bool) -> None:
    """Run the memory service until interrupted."""
    settings = serve_config.resolve({
        "data_dir": data_dir, "host": host, "port": port, "allowed_hosts": allowed_hosts,
        "log_level": log_level, "durability": durability, "tracing": tracing,
        "database": database, "workers": workers, "write_wait": write_wait}, config)
    _configure_logging(settings.log_level)
    if settings.tracing != "none" and settings.workers == 1:  # workers configure their own
        tracing_mod.configure(settings.tracing)
    try:
        _serve(settings, as_json)
    finally:
        tracing_mod.shutdown()


def _configure_logging(level: str) -> None:
    """The access log (``palimpsest.access``, INFO) as bare JSON lines on stderr."""
    logger = logging.getLogger("palimpsest")
    logger.setLevel(level.upper())
    if not any(getattr(h, "palimpsest", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.palimpsest = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False


def _serve(settings: serve_config.ServeSettings, as_json: bool) -> None:
    directory, host, port = settings.data_dir, settings.host, settings.port
    loopback = is_loopback(host)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    # One-time work — the schema, the first owner, the server's signing key — is done here,
    # once, before any worker exists (several workers would race for it).
    svc = MemoryService(directory, durability=settings.durability, database=settings.database,
                        write_wait=settings.write_wait)
    try:
        owner = _first_start(svc, directory, host, loopback)
        svc.server_keys.active()
        sock = _listen(host, port)
        bound_port = sock.getsockname()[1]
        shown_host = f"[{host.strip('[]')}]" if ":" in host else host
        url = f"http://{shown_host}:{bound_port}"
        hosts = (LOOPBACK_HOSTS if loopback else ()) + settings.allowed_hosts
        if settings.workers == 1:
            server = _server(svc, hosts, settings, worker=None)
            _announce(url=url, host=host, port=bound_port, directory=directory, owner=owner,
                      pids=[os.getpid()], as_json=as_json)
            server.run(sockets=[sock])
            return
    finally:
        svc.close()
    # Several workers: the supervisor keeps the socket and nothing else (no store, no thread).
    supervisor = Supervisor(settings.workers, functools.partial(_worker, sock, hosts, settings))
    supervisor.start()
    _announce(url=url, host=host, port=bound_port, directory=directory, owner=owner,
              pids=supervisor.pids(), as_json=as_json)
    try:
        supervisor.run()
    finally:
        sock.close()


def _first_start(svc: MemoryService, directory: Path, host: str,
                 loopback: bool) -> dict[str, Any] | None:
    """The owner made on the first start of a loopback server (its credential, shown once);
    a public listener without a credential configured beforehand is refused."""
    if not loopback:
        active = [c for c in svc.list_credentials() if not c.revoked]
        if not active:
            raise InvalidInput(
                f"refusing to listen on non-loopback address {host} without configured "
                "credentials",
                code="no-credentials",
                hint=f"create one first: pal admin --data-dir {directory} --create member "
                "create NAME --admin, then pal admin credential create MEMBER_ID",
            )
        return None
    made = svc.bootstrap_owner()
    if made is None:
        return None
    member, secret = made
    return {"member_id": member.id, "credential": secret}


def _worker(sock: socket.socket, hosts: tuple[str, ...], settings: serve_config.ServeSettings,
            index: int) -> None:
    """One worker process (forked by the supervisor): its own store connection, app and
    event loop over the shared socket."""
    if settings.tracing != "none":  # the exporter's threads belong to this process
        tracing_mod.configure(settings.tracing)
    listener = SharedListener(fileno=sock.detach())
    svc = MemoryService(settings.data_dir, durability=settings.durability,
                        database=settings.database, write_wait=settings.write_wait)
    try:
        _server(svc, hosts, settings, worker=index).run(sockets=[listener])
    finally:
        svc.close()
        tracing_mod.shutdown()


def _server(svc: MemoryService, hosts: tuple[str, ...], settings: serve_config.ServeSettings,
            *, worker: int | None) -> uvicorn.Server:
    """The HTTP server over ``svc``, with SIGINT/SIGTERM already asking it to stop."""
    app = create_app(svc, ApiConfig(guard=GuardConfig(allowed_hosts=hosts), worker=worker or 0))
    # the access log is ours (api/telemetry): uvicorn's own would repeat every request
    server = uvicorn.Server(uvicorn.Config(
        app, log_level=settings.log_level, access_log=False, lifespan="on",
        server_header=False, limit_concurrency=2048, timeout_keep_alive=30,
        timeout_graceful_shutdown=GRACEFUL_SECONDS,
        backlog=ACCEPT_BATCH if worker is not None else 2048))

    # uvicorn turns SIGINT/SIGTERM into a graceful shutdown and then re-raises the signal
    # to whatever handler was installed before it. Ours only asks the server to stop: a
    # signal that arrives before uvicorn installs its own handlers still stops it, and the
    # re-raised one lets the process close the store and exit 0 instead of dying by it.
    def stop(signum: int, frame: object) -> None:
        server.should_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    return server


def _announce(*, url: str, host: str, port: int, directory: Path, owner: dict[str, Any] | None,
              pids: list[int], as_json: bool) -> None:
    if as_json:
        line: dict[str, Any] = {"url": url, "host": host, "port": port,
                                "data_dir": str(directory), "pid": os.getpid(),
                                "workers": pids}
        if owner is not None:
            line["owner"] = owner
        sys.stdout.write(canonical.encode(line).decode() + "\n")
    else:
        if owner is not None:
            click.echo(f"first start: created owner member {safe_text(owner['member_id'])}")
            click.echo("owner credential (shown once, store it now): "
                       f"{safe_text(owner['credential'])}")
        click.echo(f"data directory: {safe_text(str(directory))}")
        shown = f", {len(pids)} worker processes" if len(pids) > 1 else ""
        click.echo(f"listening on {safe_text(url)}{shown} (Ctrl-C stops)")
        click.echo(f"review desk: {safe_text(url)}/ui/ (sign in with a credential)")
    sys.stdout.flush()
