"""schemathesis against the live server's own OpenAPI document.

Two bounded passes (few examples per operation, fixed seed, no coverage phase) so that they
run in the suite; a full run with the coverage phase is in docs/service.md:

1. every operation the server documents (the Memory Git routes mounted on the same app
   included): no generated request, valid or not, gets a server error;
2. the UHP Memories routes (``/v1/…``): additionally every response matches the documented
   status codes, content type and schema — the OpenAPI document is accurate.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.api.server import Server
from tests.conftest import BOTH

BACKENDS = BOTH  # no server error on any operation, on either store


def _run(server: Server, token: str, report_dir: Path, *args: str) -> None:
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    assert st is not None, "schemathesis is a dev dependency"
    result = subprocess.run(
        [st, "run", f"{server.url}/openapi.json",
         "--header", f"Authorization: Bearer {token}",
         "--seed", "20261004", "--workers", "1", "--generation-database", "none",
         "--phases", "examples,fuzzing", "--no-color",
         "--report-dir", str(report_dir), "--max-failures", "20", *args],
        capture_output=True, text=True, timeout=600, check=False, cwd=report_dir)
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-4000:]


@pytest.fixture(scope="module")
def token(members: dict[str, Any]) -> str:
    return str(members["owner"].token)


def test_no_server_error_on_any_operation(server: Server, token: str, tmp_path: Path) -> None:
    _run(server, token, tmp_path, "--checks", "not_a_server_error", "--max-examples", "5")


def test_memories_routes_match_their_openapi(server: Server, token: str,
                                             tmp_path: Path) -> None:
    _run(server, token, tmp_path,
         "--include-path-regex", "^/v1/",
         "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
                     "response_schema_conformance",
         "--max-examples", "10")
