"""Every import between the modules of ``src/palimpsest``, read from the source with ``ast``:
module level, inside functions and under ``TYPE_CHECKING`` alike (a cycle hidden there is
still a cycle)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "src"
PACKAGE = ROOT / "palimpsest"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (packages by their ``__init__``)."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _targets(tree: ast.AST, here: str, is_package: bool, known: set[str] | dict[str, Path]
             ) -> Iterator[str]:
    """Every name an import statement of ``tree`` brings in, resolved: ``from pkg import mod``
    imports ``pkg.mod``; ``from mod import name`` imports ``mod`` (as import-linter counts)."""
    base = here.split(".") if is_package else here.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                stem = base[:len(base) - node.level + 1]
                name = ".".join(stem + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            for alias in node.names:
                sub = f"{name}.{alias.name}"
                yield sub if sub in known else name


@cache
def graph() -> dict[str, set[str]]:
    """module -> the package modules it imports."""
    known = modules()
    out: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        out[name] = {t for t in _targets(tree, name, path.name == "__init__.py", known)
                     if t in known and t != name}
    return out


def external(name: str) -> set[str]:
    """Top-level names of everything ``name`` imports from outside the package."""
    path = modules()[name]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return {t.split(".")[0] for t in _targets(tree, name, path.name == "__init__.py", set())
            if not t.startswith("palimpsest")}
