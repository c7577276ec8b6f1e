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

A Memory Git op's payload is kept apart from its changeset's canonical bytes (named there by
its digest), so ``erase`` removes it; an op whose payload was erased projects nothing of it
(a correction or supersession still retires its target, which the op names itself). Record
bodies made here are content-addressed like every other, so a rebuild makes the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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


def _writer(core: Core, cs: Changeset) -> dict[str, Any]:
    """``written_by`` of a merged record: the author of the changeset that made it, complete
    with the member's type, exactly as a direct write stamps it."""
    kind, _, ident = cs.author.partition(":")
    member = core.store.member(ident) if kind == "member" and ident else None
    if member is not None:
        who = member.principal
    elif kind in ("member", "group") and ident:
        who = Principal(kind, ident)
    else:
        who = Principal("provider", cs.author)
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


_MAKES = ("add_memory", "correct_memory", "supersede_memory")
_REVISES = ("attach_evidence", "attach_verification", "propose_deprecation")


def carriers(changesets: Iterable[Changeset], record_id: str) -> tuple[list[str], set[str],
                                                                        bool]:
    """Where a record's bytes live in Memory Git history: the digests of the payloads that
    made or revised it (on any ref, the source of a cherry-pick included), the record ids those
    ops name (stored responses naming them may carry the bytes too), and whether some of its
    text was taken over from another record's payload (a correction without ``content``), which
    erasing this record cannot remove."""
    by_id = {cs.id: cs for cs in changesets}
    found: dict[str, None] = {}
    names = {record_id}
    borrowed = False
    picks: list[tuple[str, Op]] = []
    for cs in by_id.values():
        for op in cs.ops:
            if op.payload_digest is None or op.payload is None:
                continue
            p = op.payload
            if not ((op.op_type in _MAKES and op.result == record_id)
                    or (op.op_type in _REVISES and op.target == record_id)
                    or (op.op_type == "add_relationship" and p.get("from_memory_id") == record_id)):
                continue
            found[op.payload_digest] = None
            if op.op_type in _MAKES[1:] and op.result == record_id and "content" not in p:
                borrowed = True
            source = p.get("cherrypicked_from")
            if isinstance(source, str) and source in by_id:
                picks.append((source, op))
    for source, op in picks:
        want = {k: v for k, v in (op.payload or {}).items() if k != "cherrypicked_from"}
        for o in by_id[source].ops:
            if (o.payload is not None and o.payload_digest is not None
                    and (o.op_type, o.target) == (op.op_type, op.target)
                    and {k: v for k, v in o.payload.items()
                         if k not in ("memory_id", "event_id")} == want):
                found[o.payload_digest] = None
                if o.result:
                    names.add(o.result)
    return list(found), names, borrowed


def _forget(core: Core, cs: Changeset, record_id: str | None) -> None:
    row = core.store.record_head(record_id or "")
    if row is not None and row["status"] == "active" and row["memory_id"] == cs.memory_id:
        core.apply(cs, Op("forget_record", record_id, _writer(core, cs)))


def apply(core: Core, cs: Changeset, op: Op) -> None:
    """Project one accepted Memory Git op (inside the caller's write transaction)."""
    if op.payload is None:  # erased: only what the op itself names still counts
        if op.op_type in ("correct_memory", "supersede_memory"):
            _forget(core, cs, op.target)
        return
    payload = dict(op.payload)
    if op.op_type == "add_memory" and op.result:
        digest = core.seal(_body(payload, op.result))
        core.apply(cs, Op("add_record", None, {"record_id": op.result, "body_digest": digest,
                                               **_writer(core, cs)}))
    elif op.op_type in ("correct_memory", "supersede_memory") and op.result:
        target = core.store.record_head(op.target or "")
        if "content" in payload or target is None:
            digest = core.seal(_body(payload, op.result))
        else:
            digest = target["body_digest"]
        core.apply(cs, Op("add_record", None, {"record_id": op.result, "body_digest": digest,
                                               **_writer(core, cs)}))
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
    if stored is None or not history.body_matches(row["body_digest"], stored):
        return  # erased or damaged bytes: never resurrect content
    from palimpsest.service.core import body_from_stored  # noqa: PLC0415 (core imports us)

    body = change(body_from_stored(load(stored)))
    digest = core.seal(body)
    core.apply(cs, Op("revise_record", record_id, {"body_digest": digest, **_writer(core, cs)}))


__all__ = ["apply", "carriers"]
