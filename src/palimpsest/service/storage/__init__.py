"""Storage backends of the memory service; the only package of the service that speaks SQL.

Everything above storage opens a store here and sees it only through :mod:`.protocol`
(``Store``, ``ReviewStore``), never as the class that implements it; backups copy and check
a database through the functions of :mod:`.backup` re-exported here.
"""

from pathlib import Path

from palimpsest.service.storage.backup import check_database, copy_database, named_files
from palimpsest.service.storage.files import private_dir
from palimpsest.service.storage.protocol import WRITE_WAIT_SECONDS, ImportTarget, Store
from palimpsest.service.storage.schema import SCHEMA_VERSION
from palimpsest.service.storage.sqlite import SqliteStore


def open_store(data_dir: Path, *, durability: str = "normal",
               database: str | None = None,
               write_wait: float = WRITE_WAIT_SECONDS) -> Store:
    """The store of a data directory: the embedded SQLite store (created when missing), or,
    with ``database`` (a ``postgresql://`` URL), the PostgreSQL store (its schema created in an
    empty database; file bytes stay in ``data_dir``).

    ``write_wait``: seconds a write waits for the writers of other processes before it is
    refused as busy (503 with ``Retry-After``).

    Raises:
        Unavailable: memory_unavailable when it cannot be opened, or holds another schema.
    """
    if database:
        from palimpsest.service.storage.postgres import PostgresStore  # noqa: PLC0415 — psycopg loads only when used

        return PostgresStore(data_dir, database, write_wait=write_wait)
    return SqliteStore(data_dir, durability=durability, write_wait=write_wait)


def migrate_database(url: str) -> tuple[int, int]:
    """Bring the PostgreSQL database at ``url`` to this version's schema: ``(found, now)``
    (``pal admin migrate-schema``).

    Raises:
        Unavailable: it cannot be reached, or holds a schema newer than this version knows.
    """
    from palimpsest.service.storage.postgres import migrate_schema  # noqa: PLC0415 — psycopg loads only when used

    return migrate_schema(url)


def database_name(url: str) -> str:
    """A PostgreSQL URL without its password, for messages."""
    from palimpsest.service.storage.postgres import redacted  # noqa: PLC0415 — psycopg loads only when used

    return redacted(url)


def copy_store(source: Store, target: Store) -> dict[str, int]:
    """Copy an embedded store's history and said rows into an empty PostgreSQL store, inside
    ``target.write()`` (``pal admin migrate --to``); the caller re-derives the rest.

    Raises:
        Conflict: target_not_empty — the target already holds a store (nothing touched).
    """
    from palimpsest.service.storage.postgres.copy import copy_store as run  # noqa: PLC0415 — psycopg loads only when used

    return run(source, target)


def open_import_target(data_dir: Path) -> ImportTarget:
    """A new store to fill from one of an older schema (``pal admin migrate``)."""
    return SqliteStore(data_dir)


__all__ = [
    "SCHEMA_VERSION",
    "WRITE_WAIT_SECONDS",
    "check_database",
    "copy_database",
    "database_name",
    "migrate_database",
    "named_files",
    "open_import_target",
    "open_store",
    "private_dir",
]
