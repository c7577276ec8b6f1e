"""Where the memory service keeps its data, and what counts as a loopback address.

Kept apart from ``serve_cmd`` so that commands needing only the default data directory
(``pal hermes``, ``pal mcp``, ``pal admin``) do not import FastAPI and uvicorn.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path


def default_data_dir() -> Path:
    """``$PAL_DATA_DIR``, else ``$XDG_DATA_HOME/palimpsest/service`` (``~/.local/share``)."""
    explicit = os.environ.get("PAL_DATA_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "palimpsest" / "service"


def holds_store(directory: Path) -> bool:
    """True when ``directory`` holds the embedded store (its SQLite database file)."""
    return (directory / "palimpsest.db").is_file()


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals; names are not resolved."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = ["default_data_dir", "holds_store", "is_loopback"]
