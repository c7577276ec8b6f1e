"""A fresh clone tests itself: no ``../shared`` beside it, nothing from this checkout.

The repository is cloned into an empty directory and the suite's fixture-using tests — every
test module that reads the interop vectors (``tests/vectors/``) or the hostile-input corpus
(``tests/adversarial/``), and the PostgreSQL fixture's smoke test — run there, importing the
clone's own ``palimpsest`` (the interpreter and the installed dependencies are this run's).
What is tested is the committed state (``HEAD``), as CI sees it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(1200)]
FIXTURE_USE = re.compile(r"INTEROP|VECTORS|tests/vectors|\"adversarial\"|adversarial/")


def _fixture_modules(tests: Path) -> list[str]:
    return sorted(str(p.relative_to(tests.parent)) for p in tests.rglob("test_*.py")
                  if p.name != Path(__file__).name  # not itself: that would recurse
                  and FIXTURE_USE.search(p.read_text(encoding="utf-8")))


def test_a_fresh_clone_runs_its_fixture_tests(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    clone = empty / "palimpsest"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO_ROOT), str(clone)],
                   check=True, timeout=300)
    assert not (empty / "shared").exists() and sorted(os.listdir(empty)) == ["palimpsest"]
    modules = _fixture_modules(clone / "tests")
    assert len(modules) >= 10, modules
    assert "tests/hn/test_interop.py" in modules
    assert "tests/ops/test_clean_clone.py" not in modules
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PAL_", "PYTEST_", "GIT_")) and k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(clone / "src")
    env["HOME"] = str(tmp_path / "home")
    where = subprocess.run([sys.executable, "-c", "import palimpsest; print(palimpsest.__file__)"],
                           cwd=clone, env=env, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(clone / "src"), where.stdout
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *modules,
         "tests/ops/test_pgcluster.py::test_the_server_runs_unprivileged_on_loopback_and_is_used"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=1200, check=False)
    tail = run.stdout[-4000:] + run.stderr[-2000:]
    assert run.returncode == 0, tail
    summary = run.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary and "error" not in summary
