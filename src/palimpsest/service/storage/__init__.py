"""Storage backends of the memory service; the only package of the service that speaks SQL."""

from palimpsest.service.storage.sqlite import SqliteStore

__all__ = ["SqliteStore"]
