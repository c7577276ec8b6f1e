"""docs/architecture.md stays true: every module or package it names exists, and it names
every package of ``src/palimpsest``."""

from __future__ import annotations

import re
from pathlib import Path

from tests.architecture.imports import PACKAGE

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
ROOTED = ("src/", "tests/", "docs/", "bench/")  # paths from the repository root
# `hn/store.py`, `service/ops/`, `errors.py`: a path below src/palimpsest in backticks
NAMED = re.compile(r"`((?:[a-z_][a-z0-9_]*/)*(?:[a-z_][a-z0-9_]*\.py|[a-z_][a-z0-9_]*/))`")


def named_paths(text: str | None = None) -> set[str]:
    return set(NAMED.findall(DOC.read_text(encoding="utf-8") if text is None else text))


def missing(paths: set[str]) -> list[str]:
    return sorted(p for p in paths
                  if not ((REPO if p.startswith(ROOTED) else PACKAGE) / p).exists())


def test_the_page_names_paths_at_all() -> None:
    assert {"service/storage/protocol.py", "service/memorygit/"} <= named_paths()


def test_every_named_module_exists() -> None:
    assert missing(named_paths()) == []


def test_every_package_is_named() -> None:
    packages = {str(p.parent.relative_to(PACKAGE)) + "/" for p in PACKAGE.rglob("__init__.py")
                if p.parent != PACKAGE}
    assert sorted(packages - named_paths()) == []


def test_a_module_that_is_gone_is_reported() -> None:
    text = "| `service/gitops.py` | old | and `service/memorygit/ops.py`, `tests/nowhere/` |"
    assert missing(named_paths(text)) == ["service/gitops.py", "tests/nowhere/"]
