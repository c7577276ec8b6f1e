"""One module per fuzz target; each defines ``TARGET`` and runs itself under atheris as
``__main__``. Adding a target is adding one file here (it is discovered by name)."""

from __future__ import annotations

import importlib
import pkgutil

from tests.fuzz.harness import Target


def names() -> list[str]:
    """Every target module's name, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load(name: str) -> Target:
    """Import one target module and return its ``TARGET``."""
    module = importlib.import_module(f"{__name__}.{name}")
    target = module.TARGET
    if not isinstance(target, Target) or target.name != name:
        raise TypeError(f"tests.fuzz.targets.{name} must define TARGET = Target(name={name!r}, …)")
    return target


def load_all() -> list[Target]:
    """Every target, sorted by name."""
    return [load(name) for name in names()]
