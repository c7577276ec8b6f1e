"""What storage hands the service core: plain values, never a database row.

Every backend (the embedded SQLite store, the server database to come) converts its rows into
these before they leave ``service/storage/``, so the core reads attributes of values and no
module above storage knows what a row of any driver looks like.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple


@dataclass(frozen=True, slots=True)
class RecordHead:
    """A record's current projected state (``n`` orders records as they were first written)."""

    n: int
    id: str
    memory_id: str
    type: str
    version: int
    status: str
    written_at: str
    body_digest: str


@dataclass(frozen=True, slots=True)
class StoredVersion:
    """One version of a record with its body's bytes (``None`` once erased); ``n`` and
    ``record_status`` are set when read through the record (current versions)."""

    record_id: str
    memory_id: str
    version: int
    body_digest: str
    written_at: str
    invalidated_at: str | None
    forgotten_at: str | None
    written_by: Mapping[str, Any]
    extra: Mapping[str, Any]
    changeset_id: str
    data: bytes | None
    n: int | None = None
    record_status: str | None = None


@dataclass(frozen=True, slots=True)
class StoredFile:
    """An uploaded file (its bytes live content-addressed beside the database)."""

    id: str
    sha256: str
    name: str
    media_type: str
    bytes: int
    created_by: str
    created_at: int


@dataclass(frozen=True, slots=True)
class Edge:
    """A reference from record ``src`` (in memory ``memory_id``) to record ``dst``."""

    src: str
    dst: str
    rel: str
    memory_id: str


class Hit(NamedTuple):
    """One search candidate: row number, BM25 score (higher is better), the analysed text,
    the conversation thread, the instant the record is about, the row of the episode
    written just before it in its conversation, and its indexed context (for the re-ranker)."""

    n: int
    score: float
    text: str
    thread: str | None
    when: str | None
    follows: int | None = None
    context: str = ""


__all__ = ["Edge", "Hit", "RecordHead", "StoredFile", "StoredVersion"]
