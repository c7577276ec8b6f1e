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
- ``add_relationship``: a new version of the *from* record with one more reference
  ``{rel: kind, record_id: to}`` (so the UHP graph shows the edge);
- ``attach_evidence`` / ``attach_verification`` with a target: a new version of the target
  whose ``attributes.evidence`` / ``attributes.verification`` gains the item;
- ``propose_deprecation``: a new version with ``attributes.deprecation_proposed`` = the reason
  (the record stays active, as in the Memory Git projection).

Memory Git content lives inside its changeset (that is what review signs off), so ``erase``
cannot remove it; the body row is a projection rebuilt from the changeset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from palimpsest.service import history
from palimpsest.service.model import (
    Changeset,
    ContentPart,
    Op,
    Principal,
    RecordBody,
    Reference,
)
from palimpsest.service.storage.sqlite import load

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
    elif op.op_type == "add_relationship":
        to = str(payload.get("to_memory_id", ""))
        rel = str(payload.get("kind", ""))
        _revise(core, cs, payload.get("from_memory_id"), lambda b: replace(
            b, references=(*b.references, Reference(rel, cs.memory_id, to))))
    elif op.op_type in ("attach_evidence", "attach_verification") and op.target:
        name = "evidence" if op.op_type == "attach_evidence" else "verification"
        item = {k: payload[k] for k in ("kind", "source", "note", "status") if k in payload}
        _revise(core, cs, op.target, lambda b: replace(b, attributes={
            **b.attributes, name: [*b.attributes.get(name, []), item]}))
    elif op.op_type == "propose_deprecation":
        reason = payload.get("reason")
        _revise(core, cs, op.target, lambda b: replace(b, attributes={
            **b.attributes, "deprecation_proposed": reason}))


def _revise(core: Core, cs: Changeset, record_id: str | None,
            change: Callable[[RecordBody], RecordBody]) -> None:
    """A new version of an active record of this memory with ``change`` applied to its body."""
    row = core.store.record_head(record_id or "")
    if row is None or row["status"] != "active" or row["memory_id"] != cs.memory_id:
        return  # not an accepted record here (e.g. erased): nothing to overlay
    stored = core.store.body(row["body_digest"])
    if stored is None or not history.body_matches(row["body_digest"], *stored):
        return  # erased or damaged bytes: never resurrect content
    from palimpsest.service.core import body_from_stored  # noqa: PLC0415 (core imports us)

    body = change(body_from_stored(load(stored[1])))
    digest = core.seal(body)
    core.apply(cs, Op("revise_record", record_id, {"body_digest": digest, **_writer(cs)}))


__all__ = ["apply"]
