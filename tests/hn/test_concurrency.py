"""Several real processes append to one stream at once: every attempt either lands or is told
to reload and retry; the stream never forks and never loses a landed entry (§9)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from palimpsest.hn import store
from palimpsest.identity import save_identity
from tests.conftest import REPO_ROOT
from tests.hn.helpers import ALICE
from tests.hn.streams import new_repo

WORKER = Path(__file__).with_name("append_worker.py")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)])
    return env


def _check_stream(path: Path, landed: list[str]) -> None:
    repo = store.open_repository(path)
    [ref] = store.list_memory_refs(repo)
    stream = store.load_stream(repo, ref)  # full verification: linear, continuous, signed
    assert sorted(m.memory_id for m in stream) == sorted(landed)
    assert [m.envelope.sequence for m in stream] == list(range(1, len(landed) + 1))


def test_library_appends_from_racing_processes(tmp_path: Path) -> None:
    path = tmp_path / "repo"
    new_repo(path)
    save_identity(Path(store.open_repository(path).path), ALICE)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(path), str(go), "6", f"w{n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        for n in range(5)
    ]
    go.write_text("go")
    landed: list[str] = []
    conflicts = 0
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        for line in out.decode().splitlines():
            event = json.loads(line)
            if "landed" in event:
                landed.append(event["landed"])
            else:
                assert "reload and retry" in event["conflict"]
                conflicts += 1
    assert len(landed) + conflicts == 30
    assert landed, "at least one append must land"
    _check_stream(path, landed)


def test_cli_appends_from_racing_processes(tmp_path: Path) -> None:
    path = tmp_path / "repo"
    new_repo(path)
    save_identity(Path(store.open_repository(path).path), ALICE)
    cmd = [sys.executable, "-m", "palimpsest.cli.main", "memory", "--repo", str(path), "record",
           "--kind", "observation", "--at", "HEAD", "--applies", "exact", "--json"]  # fmt: skip
    procs = [
        subprocess.Popen(
            [*cmd, f"process {n}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()
        )
        for n in range(6)
    ]
    landed: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        if proc.returncode == 0:
            landed.append(json.loads(out)["memoryId"])
        else:
            assert proc.returncode == 1
            assert err.decode().startswith("pal: compare-and-swap failed; reload and retry")
            assert err.decode().count("\n") == 1
    assert landed
    _check_stream(path, landed)


@pytest.mark.parametrize("attempt", range(1))
def test_sequential_appends_never_conflict(tmp_path: Path, attempt: int) -> None:
    path = tmp_path / "repo"
    new_repo(path)
    save_identity(Path(store.open_repository(path).path), ALICE)
    go = tmp_path / "go"
    go.write_text("go")
    proc = subprocess.run(
        [sys.executable, str(WORKER), str(path), str(go), "5", "solo"],
        capture_output=True, env=_env(), check=True, timeout=120,
    )  # fmt: skip
    events = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert all("landed" in e for e in events) and len(events) == 5
    _check_stream(path, [e["landed"] for e in events])
