"""The rooms keep their arrows (ARCHITECTURE.md §2, docs/architecture.md): no import cycle
anywhere in ``src/palimpsest`` — not behind ``TYPE_CHECKING``, not in a function — arrows only
downward between the top-level packages, and only ``service/storage/`` speaks SQL for the
service."""

from __future__ import annotations

import ast
import re

import pytest

from tests.architecture import imports
from tests.architecture.imports import graph, modules

FOUNDATION = frozenset({"canonical", "text", "identity", "errors"})
MIDDLE = frozenset({"service", "hn", "search"})
EDGES = frozenset({"cli", "api", "ui", "mcp", "client", "hermes"})
# Between edge packages: the CLI drives them all; the API mounts MCP and the review desk.
EDGE_TO_EDGE = {"cli": EDGES, "api": frozenset({"mcp", "ui"})}
SQL = re.compile(r"\b(SELECT\s|INSERT\s+(OR\s+\w+\s+)?INTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b|"
                 r"CREATE\s+(TABLE|INDEX|TRIGGER|VIRTUAL)\b|PRAGMA\s)", re.IGNORECASE)


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "palimpsest"


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1 or node in edges.get(node, ()):
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_sees_hidden_imports() -> None:
    # a cycle through a TYPE_CHECKING import and a function-level import is a cycle
    a = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import b\n")
    b = ast.parse("def f():\n    from pkg.a import thing\n")
    known = {"pkg.a", "pkg.b"}
    edges = {"pkg.a": set(imports._targets(a, "pkg.a", False, known)) & known,
             "pkg.b": set(imports._targets(b, "pkg.b", False, known)) & known}
    assert cycles(edges) == [["pkg.a", "pkg.b"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def test_no_import_cycles_anywhere() -> None:
    assert cycles(graph()) == []


def test_arrows_only_go_downward() -> None:
    wrong = []
    for module, targets in graph().items():
        a = room(module)
        for target in targets:
            b = room(target)
            if b in (a, "palimpsest"):
                continue
            if a in FOUNDATION or a in ("palimpsest", "search"):
                ok = b in FOUNDATION
            elif a in MIDDLE:
                # hn never imports service; service reads hn (the repo-memory provider)
                ok = b in FOUNDATION or b == "search" or (a, b) == ("service", "hn")
            else:
                ok = b in FOUNDATION or b in MIDDLE or b in EDGE_TO_EDGE.get(a, ())
            if not ok:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


@pytest.mark.parametrize("name", ["palimpsest.service", "palimpsest.mcp"])
def test_service_and_mcp_never_import_the_http_api(name: str) -> None:
    offenders = [f"{m} -> {t}" for m, ts in graph().items() if m.startswith(name + ".")
                 or m == name for t in ts if t.startswith("palimpsest.api")]
    assert offenders == []


def test_only_service_storage_speaks_sql_for_the_service() -> None:
    offenders = []
    for name, path in modules().items():
        if not name.startswith("palimpsest.service") or name.startswith(
                "palimpsest.service.storage"):
            continue
        if "sqlite3" in imports.external(name):
            offenders.append(f"{name} imports sqlite3")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and SQL.search(node.value):
                offenders.append(f"{name}:{node.lineno} holds SQL text")
            if isinstance(node, ast.Attribute) and node.attr == "Row":
                offenders.append(f"{name}:{node.lineno} names a row type")
    assert offenders == []


def test_no_prefix_families_in_a_flat_folder() -> None:
    by_folder: dict[str, list[str]] = {}
    for name in modules():
        folder, _, leaf = name.rpartition(".")
        by_folder.setdefault(folder, []).append(leaf)
    families = {f"{folder}.{prefix}*" for folder, leaves in by_folder.items()
                for prefix in ("git",) for leaf in leaves if leaf.startswith(prefix)}
    assert families == set()


# What the rest of the code may import of storage: the package (which opens a store) and the
# interface it is seen through; never the classes that implement it.
STORAGE_FACES = frozenset({"palimpsest.service.storage", "palimpsest.service.storage.protocol",
                           "palimpsest.service.storage.rows"})
# pal admin migrate reads stores of older schemas through storage's own readers.
OLD_READERS = frozenset({"palimpsest.service.storage.schema1",
                         "palimpsest.service.storage.schema2"})


def test_nothing_outside_storage_sees_the_classes_behind_the_store_protocol() -> None:
    offenders = []
    for module, targets in graph().items():
        if module.startswith("palimpsest.service.storage"):
            continue
        for target in targets:
            if not target.startswith("palimpsest.service.storage") or target in STORAGE_FACES:
                continue
            if module == "palimpsest.service.upgrade" and target in OLD_READERS:
                continue
            offenders.append(f"{module} -> {target}")
    assert offenders == []
