"""Run the real `pal serve` on an ephemeral loopback port for a test, and stop it."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .world import PAL

START_TIMEOUT = 120.0


@contextmanager
def pal_serve(data_dir: Path, cwd: Path | None = None) -> Iterator[str]:
    """Start `pal serve --json` on port 0 (in ``cwd`` when given) and yield its URL; terminate
    it afterwards."""
    log = (data_dir.parent / "serve.log").open("w")
    proc = subprocess.Popen(
        [
            PAL,
            "serve",
            "--data-dir",
            str(data_dir),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--json",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        cwd=cwd,
    )
    log.close()  # the child holds its own descriptor
    line: list[str] = []
    reader = threading.Thread(
        target=lambda: line.append(proc.stdout.readline() if proc.stdout else ""), daemon=True
    )
    reader.start()
    reader.join(START_TIMEOUT)
    try:
        if not line or not line[0]:
            proc.kill()
            raise RuntimeError(
                "pal serve did not start: " + (data_dir.parent / "serve.log").read_text()
            )
        yield str(json.loads(line[0])["url"])
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[str]) -> None:
    """Terminate a server process and wait for it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
