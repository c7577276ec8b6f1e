"""The rooms this issue added keep the house's arrows (ARCHITECTURE.md §2): the client knows
only the foundations, never the service; telemetry and the docs page belong to ``api``; the CLI's
option rule needs nothing but click."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "palimpsest"
FOUNDATIONS = {"palimpsest.canonical", "palimpsest.errors", "palimpsest.text",
               "palimpsest.identity"}


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "palimpsest":  # from palimpsest import canonical
                out.update(f"palimpsest.{alias.name}" for alias in node.names)
            else:
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {name for name in out if name.startswith("palimpsest")}


@pytest.mark.parametrize(("room", "allowed"), [
    ("client", FOUNDATIONS | {"palimpsest.client"}),
    ("api/telemetry", FOUNDATIONS | {"palimpsest.api", "palimpsest.service"}),
    ("cli/options.py", set()),
    ("cli/connect.py", FOUNDATIONS | {"palimpsest.cli", "palimpsest.client"}),
])
def test_imports_point_downward(room: str, allowed: set[str]) -> None:
    target = SRC / room
    files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
    assert files
    for path in files:
        for name in _imports(path):
            assert any(name == a or name.startswith(a + ".") for a in allowed), (path, name)
