"""Storage backends of the memory service; the only package of the service that speaks SQL.

Everything above storage opens a store here and sees it only through :mod:`.protocol`
(``Store``, ``ReviewStore``), never as the class that implements it; backups copy and check
a database through the functions of :mod:`.backup` re-exported here.
"""

from pathlib import Path

from palimpsest.service.storage.backup import check_database, copy_database, named_files
from palimpsest.service.storage.files import private_dir
from palimpsest.service.storage.protocol import ImportTarget, Store
from palimpsest.service.storage.schema import SCHEMA_VERSION
from palimpsest.service.storage.sqlite import SqliteStore


def open_store(data_dir: Path, *, durability: str = "normal") -> Store:
    """The store of a data directory (the embedded SQLite store; created when missing).

    Raises:
        Unavailable: memory_unavailable when it cannot be opened, or holds another schema.
    """
    return SqliteStore(data_dir, durability=durability)


def open_import_target(data_dir: Path) -> ImportTarget:
    """A new store to fill from one of an older schema (``pal admin migrate``)."""
    return SqliteStore(data_dir)


__all__ = ["SCHEMA_VERSION", "check_database", "copy_database", "named_files",
           "open_import_target", "open_store", "private_dir"]
