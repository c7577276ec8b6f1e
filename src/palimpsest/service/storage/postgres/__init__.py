"""The PostgreSQL store (``pal serve --database postgresql://…``): the service's rows on a
server database that several processes share; see :mod:`.store`."""

from palimpsest.service.storage.postgres.schema import SCHEMA_VERSION
from palimpsest.service.storage.postgres.store import (
    PostgresStore,
    StoreVersionError,
    migrate_schema,
    redacted,
)

__all__ = ["SCHEMA_VERSION", "PostgresStore", "StoreVersionError", "migrate_schema", "redacted"]
