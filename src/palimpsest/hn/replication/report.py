"""Outcomes of a replication sync: per-stream results, selector notes, publication, the report.

Pure values with their wire form (``pal sync --json``); no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from palimpsest.hn.replication.selection import Budgets
from palimpsest.hn.replication.transport import Measurement

FAILED = ("over-budget", "structurally-invalid", "dependency-missing", "relationship-invalid")


def over_budget(m: Measurement, budgets: Budgets) -> list[str]:
    """The budgets ``m`` exceeds, by name (empty: within every one)."""
    return [name for name, value, limit in (
        ("events", m.events, budgets.max_events),
        ("objects", m.objects, budgets.max_objects),
        ("object bytes", m.max_object_bytes, budgets.max_object_bytes),
        ("attachment bytes", m.attachment_bytes, budgets.max_attachment_bytes),
        ("total bytes", m.total_bytes, budgets.max_total_bytes),
    ) if value > limit]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Dependency:
    """A missing dependency that kept a stream out (§20.2)."""

    kind: str
    missing_id: str
    owner_memory_id: str
    owner_stream: str
    required_selectors: tuple[str, ...]
    required_ref: str
    recovery: str

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {
            "dependencyKind": self.kind,
            "missingId": self.missing_id,
            "ownerMemoryId": self.owner_memory_id,
            "ownerStream": self.owner_stream,
            "requiredSelectors": list(self.required_selectors),
            "requiredRef": self.required_ref,
            "recovery": self.recovery,
        }


@dataclass(frozen=True, slots=True)
class StreamOutcome:
    """The final outcome of one selected (or discovered) memory stream."""

    stream: str
    actor: str
    status: str
    diagnostic: str = ""
    remote_head: str = ""
    accepted_ref: str = ""
    previous_head: str = ""
    unchanged: bool = False
    measurement: Measurement | None = None
    dependency: Dependency | None = None

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {
            "stream": self.stream,
            "actor": self.actor,
            "status": self.status,
            "diagnostic": self.diagnostic,
            "remoteHead": self.remote_head,
            "acceptedRef": self.accepted_ref,
            "previousHead": self.previous_head,
            "unchanged": self.unchanged,
            "measurement": self.measurement.to_json() if self.measurement else None,
            "dependency": self.dependency.to_json() if self.dependency else None,
        }


@dataclass(frozen=True, slots=True)
class SelectorNote:
    """An actor or proposal selector: reported, never imported as memory."""

    kind: str
    id: str
    status: str
    diagnostic: str

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"kind": self.kind, "id": self.id, "status": self.status,
                "diagnostic": self.diagnostic}  # fmt: skip


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    """The push of one local memory ref."""

    ref: str
    status: str  # published, up-to-date, rejected, invalid-local
    diagnostic: str = ""

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {"ref": self.ref, "status": self.status, "diagnostic": self.diagnostic}


@dataclass(frozen=True, slots=True)
class SyncReport:
    """Everything one sync did, in a stable order."""

    remote: str
    url: str
    implicit_selection: bool
    transaction: str
    recovered: tuple[str, ...]
    memories: tuple[StreamOutcome, ...]
    selectors: tuple[SelectorNote, ...]
    malformed_refs: tuple[str, ...]
    published: tuple[PublishOutcome, ...]
    shallow_recovered: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """True when a stream failed or a publication was rejected."""
        return any(item.status in FAILED for item in self.memories) or any(
            item.status in ("rejected", "invalid-local") for item in self.published
        )

    def to_json(self) -> dict[str, Any]:
        """Wire form (``pal sync --json``)."""
        return {
            "version": 0,
            "remote": self.remote,
            "url": self.url,
            "implicitSelection": self.implicit_selection,
            "transaction": self.transaction,
            "recovered": list(self.recovered),
            "memories": [item.to_json() for item in self.memories],
            "selectors": [item.to_json() for item in self.selectors],
            "malformedRefs": list(self.malformed_refs),
            "published": [item.to_json() for item in self.published],
            "shallowRecovered": list(self.shallow_recovered),
        }


def redact_url(url: str) -> str:
    """Drop any user information (credentials) from a URL before it is reported."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


__all__ = [
    "FAILED",
    "Dependency",
    "PublishOutcome",
    "SelectorNote",
    "StreamOutcome",
    "SyncReport",
    "over_budget",
    "redact_url",
]
