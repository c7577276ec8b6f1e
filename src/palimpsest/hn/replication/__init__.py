"""Replication of memory streams: select, sync, quarantine, validate, promote, publish (§20).

Modules: :mod:`~palimpsest.hn.replication.flow` (the sync transaction), ``transport`` (Git
subprocesses: transport, quarantine, measurement, atomic ref updates), ``selection`` (saved
selections), ``txn`` (crash safety), ``report`` (outcomes).  This package re-exports the flow's
public names, so callers write ``replication.sync(...)``.
"""

from __future__ import annotations

from palimpsest.hn.replication.flow import (
    FAILED,
    KILL_ENV,
    PHASES,
    Dependency,
    Progress,
    PublishOutcome,
    SelectionView,
    SelectorNote,
    StreamOutcome,
    SyncReport,
    checkpoint,
    recover_leftovers,
    redact_url,
    save,
    show_selection,
    sync,
    sync_lock,
)

__all__ = [
    "FAILED",
    "KILL_ENV",
    "PHASES",
    "Dependency",
    "Progress",
    "PublishOutcome",
    "SelectionView",
    "SelectorNote",
    "StreamOutcome",
    "SyncReport",
    "checkpoint",
    "recover_leftovers",
    "redact_url",
    "save",
    "show_selection",
    "sync",
    "sync_lock",
]
