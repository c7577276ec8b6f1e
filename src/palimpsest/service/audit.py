"""The audit log: every write and every refusal, who made it and how it ended — never content.

The faces (the HTTP middleware in ``api/telemetry``, the MCP tool dispatcher) describe each
request as an :class:`~palimpsest.service.model.AuditEntry` from what they already know — the
route template or tool name, the memory id of the path or arguments, the caller's member and
credential id, the status and the refusal's reason code, the request id — and hand it here.
Nothing of a body, a query or a record reaches an entry, so the log cannot leak what it audits.

Entries are appended, read newest first through filters (``pal admin audit``), and pruned only
by age (the retention setting, ``audit_retention_days``); the store refuses to update one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from palimpsest.service.core import Core
from palimpsest.service.model import AUDIT_OUTCOMES, AuditEntry, invalid

DAY_MS: Final = 86_400_000
MAX_LIST: Final = 10_000
MAX_FIELD: Final = 300  # ids and route templates are short; anything longer is cut


def _clip(value: str | None) -> str | None:
    return None if value is None else value[:MAX_FIELD]


def append(core: Core, entries: Sequence[AuditEntry]) -> None:
    """Store ``entries`` in one write transaction (fields cut to a sane length)."""
    if not entries:
        return
    clipped = [AuditEntry(e.at, e.surface[:16], e.action[:MAX_FIELD], e.outcome,
                          _clip(e.reason), e.status, _clip(e.member_id), _clip(e.credential_id),
                          _clip(e.memory_id), _clip(e.request_id)) for e in entries]
    with core.store.write():
        core.store.append_audit(clipped)


def entries(core: Core, *, member_id: str | None = None, memory_id: str | None = None,
            outcome: str | None = None, since: int | None = None, until: int | None = None,
            limit: int = 100) -> list[AuditEntry]:
    """Entries matching every given filter, newest first.

    Raises:
        InvalidInput: an unknown outcome or a limit outside 1 … 10,000.
    """
    if outcome is not None and outcome not in AUDIT_OUTCOMES:
        raise invalid(f"outcome must be one of {', '.join(AUDIT_OUTCOMES)}")
    if not 1 <= limit <= MAX_LIST:
        raise invalid(f"limit must be from 1 to {MAX_LIST}")
    with core.store.read():
        return core.store.audit_entries(member_id=member_id, memory_id=memory_id,
                                        outcome=outcome, since=since, until=until, limit=limit)


def prune(core: Core, retention_days: int) -> int:
    """Delete the entries older than ``retention_days`` (0 keeps everything); how many.

    Raises:
        InvalidInput: a negative retention.
    """
    if retention_days < 0:
        raise invalid("the audit retention is a number of days, 0 or more")
    if retention_days == 0:
        return 0
    with core.store.write():
        return core.store.prune_audit(core.now_ms() - retention_days * DAY_MS)


__all__ = ["DAY_MS", "append", "entries", "prune"]
