"""schemathesis against the live server's own OpenAPI document.

Two bounded passes (few examples per operation, fixed seed, no coverage phase) so that they
run in the suite; a full run with the coverage phase is in docs/service.md:

1. every operation the server documents (Memory Git's routes, mounted on the same app, and
   the public operations routes included), with every check of a single request: no server
   error, no undocumented status, content type, headers or schema, invalid data refused, an
   unsupported method answered 405 with ``Allow``, a missing required header refused;
2. the UHP Memories routes (``/v1/…``) again with "a schema-valid request is taken" as well
   (positive_data_acceptance): the document promises nothing the server refuses. The few
   operations where a valid shape can still be refused for what it names (a key that is not a
   curve point, a member or file that does not exist, the built-in provider's missing free
   query language) leave that one check out, each with its reason, in schemathesis.toml.

The stateful and multi-credential checks (use_after_free, ensure_resource_availability,
ignored_auth, object_level_authorization) need links and several callers; the isolation
tests cover what they would.
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

CONFIG = Path(__file__).with_name("schemathesis.toml")
STATEFUL = "ignored_auth,use_after_free,ensure_resource_availability,object_level_authorization"


def _run(server: Server, token: str, report_dir: Path, *args: str) -> None:
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    assert st is not None, "schemathesis is a dev dependency"
    result = subprocess.run(
        [st, "--config-file", str(CONFIG), "run", f"{server.url}/openapi.json",
         "--header", f"Authorization: Bearer {token}",
         "--seed", "20261004", "--workers", "1", "--generation-database", "none",
         "--phases", "examples,fuzzing", "--no-color",
         "--report-dir", str(report_dir), "--max-failures", "20", *args],
        capture_output=True, text=True, timeout=600, check=False, cwd=report_dir)
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-4000:]


@pytest.fixture(scope="module")
def token(members: dict[str, Any]) -> str:
    return str(members["owner"].token)


def test_every_operation_passes_every_check(server: Server, token: str,
                                            tmp_path: Path) -> None:
    _run(server, token, tmp_path, "--exclude-checks", f"positive_data_acceptance,{STATEFUL}",
         "--max-examples", "5")


def test_memories_routes_take_what_they_document(server: Server, token: str,
                                                 tmp_path: Path) -> None:
    _run(server, token, tmp_path, "--include-path-regex", "^/v1/",
         "--exclude-checks", STATEFUL, "--max-examples", "10")
