"""Accepted Memory Git ops as UHP records: one history, one projection.

When a changeset becomes reachable from ``refs/shared/main`` (a direct UHP write, or a reviewed
merge), :meth:`palimpsest.service.core.Core.apply` projects each of its ops into records,
versions and the search index. The service's own record ops are projected by ``core``; this
module maps the eight Memory Git ops onto the same steps, so a merge changes what UHP get, list
and recall return and ``rebuild`` re-derives both alike:

- ``add_memory``: a new record (id = the memory id), type ``fact`` for facts else ``note``;
- ``correct_memory``, ``supersede_memory``: a new record for the result; the target record is
  forgotten (its trace stays);
- ``mark_duplicate``: the duplicate record is forgotten;
- ``add_relationship``, ``attach_*``, ``propose_deprecation``: no record effect (read them
  through the Memory Git context).

Memory Git content lives inside its changeset (that is what review signs off), so ``erase``
cannot remove it; the body row is a projection rebuilt from the changeset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from palimpsest.service import history
from palimpsest.service.model import (
    Changeset,
    ContentPart,
    Op,
    Principal,
    RecordBody,
)

if TYPE_CHECKING:
    from palimpsest.service.core import Core

_ATTRIBUTES = ("kind", "scope", "visibility", "tags", "confidence", "fact_key", "subject",
               "approval")


def _writer(cs: Changeset) -> dict[str, Any]:
    kind, _, ident = cs.author.partition(":")
    who = Principal(kind, ident) if kind in ("member", "group") and ident else Principal(
        "provider", cs.author)
    return history.writer_payload(cs.created_at, who)


def _body(payload: dict[str, Any], memory_id: str) -> RecordBody:
    attributes: dict[str, Any] = {k: payload[k] for k in _ATTRIBUTES if k in payload}
    attributes["memory_git_id"] = memory_id
    summary = payload.get("summary")
    return RecordBody(
        type="fact" if payload.get("kind") == "fact" else "note",
        title=summary[:300] if isinstance(summary, str) and summary else None,
        content=(ContentPart("text", text=str(payload.get("content", ""))),),
        attributes=attributes, references=(),
        valid_from=payload.get("valid_from"), valid_to=payload.get("valid_to"))


def _forget(core: Core, cs: Changeset, record_id: str | None) -> None:
    row = core.store.record_head(record_id or "")
    if row is not None and row["status"] == "active" and row["memory_id"] == cs.memory_id:
        core.apply(cs, Op("forget_record", record_id, _writer(cs)))


def apply(core: Core, cs: Changeset, op: Op) -> None:
    """Project one accepted Memory Git op (inside the caller's write transaction)."""
    payload = dict(op.payload)
    if op.op_type == "add_memory" and op.result:
        digest = core.seal(_body(payload, op.result))
        core.apply(cs, Op("add_record", None, {"record_id": op.result, "body_digest": digest,
                                               **_writer(cs)}))
    elif op.op_type in ("correct_memory", "supersede_memory") and op.result:
        target = core.store.record_head(op.target or "")
        if "content" in payload or target is None:
            digest = core.seal(_body(payload, op.result))
        else:
            digest = target["body_digest"]
        core.apply(cs, Op("add_record", None, {"record_id": op.result, "body_digest": digest,
                                               **_writer(cs)}))
        _forget(core, cs, op.target)
    elif op.op_type == "mark_duplicate":
        _forget(core, cs, payload.get("duplicate_id"))


__all__ = ["apply"]
