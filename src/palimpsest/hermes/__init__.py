"""Palimpsest memory for Hermes: a ``MemoryProvider`` plugin (standard library only).

Copied into ``$HERMES_HOME/plugins/palimpsest/`` by ``pal hermes install``; Hermes discovers it
because this file mentions ``register_memory_provider``. Nothing here imports the rest of
palimpsest. The installer (``palimpsest.hermes.install``) is not part of the copied plugin.
"""

from __future__ import annotations

from typing import Any

from .provider import PalimpsestMemoryProvider

__all__ = ["PalimpsestMemoryProvider", "register"]


def register(ctx: Any) -> None:
    """Hermes plugin entry: hand one provider instance to ``ctx.register_memory_provider``."""
    if hasattr(ctx, "register_memory_provider"):
        ctx.register_memory_provider(PalimpsestMemoryProvider())
