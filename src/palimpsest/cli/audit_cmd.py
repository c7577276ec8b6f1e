"""``pal admin audit``: read the audit log of the memory service, and prune it by age.

Every write and every refusal the service answered (HTTP routes and MCP tools) is one entry:
when, who (member, credential id), which memory, which route or tool, how it ended (``ok``,
``refused`` or ``failed``, with the reason code and the HTTP status) and the request id — never
what was written or asked. Entries are listed newest first; ``--member``, ``--memory``,
``--outcome``, ``--since`` and ``--until`` narrow them (times are RFC 3339 or an age such as
``15m``, ``2h``, ``7d``). ``pal admin audit-prune DAYS`` deletes entries older than that, as
``pal serve`` does on its own with the ``audit_retention_days`` setting.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Final

import click

from palimpsest.errors import InvalidInput
from palimpsest.service.audit import DAY_MS
from palimpsest.service.wire import iso_ms, timestamp

_AGE: Final = re.compile(r"([0-9]{1,6})([smhd])")
_UNIT_MS: Final = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": DAY_MS}


def moment(text: str | None, name: str, now_ms: int) -> int | None:
    """``text`` (RFC 3339, or an age before now) as epoch ms.

    Raises:
        InvalidInput: neither form.
    """
    if text is None:
        return None
    age = _AGE.fullmatch(text)
    if age is not None:
        return now_ms - int(age.group(1)) * _UNIT_MS[age.group(2)]
    try:
        normal = timestamp(text, name)
    except InvalidInput as exc:
        raise InvalidInput(f"{name} must be an RFC 3339 time or an age such as 2h or 7d",
                           code="invalid-time") from exc
    parsed = datetime.strptime(normal, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def human(entry: dict[str, Any]) -> str:
    """One entry on one line."""
    parts = [iso_ms(entry["at"]), f"{entry['outcome']:<7}", entry["reason"] or "-",
             entry["action"]]
    for label, key in (("member", "member_id"), ("credential", "credential_id"),
                       ("memory", "memory_id"), ("request", "request_id")):
        if entry[key]:
            parts.append(f"{label} {entry[key]}")
    return "  ".join(parts)


def install(group: click.Group, service: Any, emit: Any) -> None:
    """Add ``audit`` and ``audit-prune`` to ``pal admin`` (its store opener and printer)."""

    @group.command("audit")
    @click.option("--member", "member_id", default=None, help="Only this member's entries.")
    @click.option("--memory", "memory_id", default=None, help="Only entries naming this memory.")
    @click.option("--outcome", type=click.Choice(["ok", "refused", "failed"]), default=None,
                  help="Only writes that succeeded, refusals, or writes that failed.")
    @click.option("--since", default=None, help="From this time (RFC 3339, or an age: 2h, 7d).")
    @click.option("--until", default=None, help="Before this time (RFC 3339, or an age).")
    @click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
    @click.pass_context
    def audit(ctx: click.Context, member_id: str | None, memory_id: str | None,  # noqa: PLR0917
              outcome: str | None, since: str | None, until: str | None, limit: int) -> None:
        """List audit entries (writes and refusals, never content), newest first."""
        now = int(datetime.now(UTC).timestamp() * 1000)
        lo, hi = moment(since, "--since", now), moment(until, "--until", now)
        with service(ctx) as svc:
            rows = [e.to_wire() for e in svc.audit_log(
                member_id=member_id, memory_id=memory_id, outcome=outcome, since=lo, until=hi,
                limit=limit)]
        emit(ctx, rows, lambda: [human(r) for r in rows] or ["no audit entries match"])

    @group.command("audit-prune")
    @click.argument("days", type=click.IntRange(1, 100_000))
    @click.pass_context
    def audit_prune(ctx: click.Context, days: int) -> None:
        """Delete audit entries older than DAYS days."""
        with service(ctx) as svc:
            removed = svc.prune_audit(days)
        emit(ctx, {"removed": removed, "older_than_days": days},
             lambda: [f"removed {removed} audit entries older than {days} days"])


__all__ = ["human", "install", "moment"]
