"""Accepted Memory Git ops as UHP records: one history, one projection.

When a changeset becomes reachable from ``refs/shared/main`` (a direct UHP write, or a reviewed
merge), :meth:`palimpsest.service.core.Core.apply` projects each of its ops into records,
versions and the search index. There is one projection: this module only says, as a pure
function of the op and what the projection holds (:class:`Reader`), which record ops
(``add_record``, ``revise_record``, ``forget_record``) an accepted Memory Git op amounts to, so
a merge changes what UHP get, list and recall return through exactly the steps a direct write
takes, and ``rebuild`` re-derives both alike:

- ``add_memory``: a new record (id = the memory id), type ``fact`` for facts else ``note``;
  a memory tagged ``standing=true`` (what a reviewed write makes of ``attributes.standing``)
  is a standing record, so it reaches the prime exactly as the same direct write would;
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
from dataclasses import dataclass, replace
from typing import Any, Protocol

from palimpsest.service import history
from palimpsest.service.memorygit.ops import STANDING_TAG
from palimpsest.service.model import (
    Changeset,
    ContentPart,
    Member,
    Op,
    Principal,
    RecordBody,
    Reference,
)

_ATTRIBUTES = ("kind", "scope", "visibility", "tags", "confidence", "fact_key", "subject",
               "approval")
_MAKES = ("add_memory", "correct_memory", "supersede_memory")
_REVISES = ("attach_evidence", "attach_verification", "propose_deprecation")


class Reader(Protocol):
    """What the record projection holds, as the steps of one op need it."""

    def head(self, record_id: str) -> history.Head | None:
        """The record's current state (``None``: no such record)."""

    def body(self, digest: str) -> RecordBody | None:
        """A stored body that still matches its digest (``None``: erased or damaged)."""

    def member(self, member_id: str) -> Member | None:
        """A member, for a complete ``written_by``."""


@dataclass(frozen=True, slots=True)
class Step:
    """One record op to project; ``body`` is new content its payload names by digest."""

    op: Op
    body: RecordBody | None = None


def _writer(reader: Reader, cs: Changeset) -> dict[str, Any]:
    """``written_by`` of a merged record: the author of the changeset that made it, complete
    with the member's type, exactly as a direct write stamps it."""
    kind, _, ident = cs.author.partition(":")
    member = reader.member(ident) if kind == "member" and ident else None
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
    if STANDING_TAG in (payload.get("tags") or ()):
        attributes["standing"] = True
    summary = payload.get("summary")
    return RecordBody(
        type="fact" if payload.get("kind") == "fact" else "note",
        title=summary[:300] if isinstance(summary, str) and summary else None,
        content=(ContentPart("text", text=str(payload.get("content", ""))),),
        attributes=attributes, references=(),
        valid_from=payload.get("valid_from"), valid_to=payload.get("valid_to"))


def fields_of(body: RecordBody) -> dict[str, Any]:
    """A record's values under the Memory Git field names its ops set (``content``,
    ``summary``, and the attributes ``_body`` keeps) — what a correction of it changes."""
    out: dict[str, Any] = {"content": "\n".join(p.words for p in body.content if p.words)}
    if body.title:
        out["summary"] = body.title
    for name in (*_ATTRIBUTES, "valid_from", "valid_to"):
        value = body.attributes.get(name) if name in _ATTRIBUTES else getattr(body, name)
        if value is not None:
            out[name] = value
    return out


def _sealed(body: RecordBody) -> str:
    return history.seal_body(body)[0]


def steps(reader: Reader, cs: Changeset, op: Op) -> list[Step]:
    """The record ops one accepted Memory Git op amounts to (see the module docs)."""
    if op.payload is None:  # erased: only what the op itself names still counts
        return _forget(reader, cs, op.target) if op.op_type in _MAKES[1:] else []
    payload = dict(op.payload)
    if op.op_type == "add_memory" and op.result:
        body = _body(payload, op.result)
        return [Step(Op("add_record", None, {"record_id": op.result,
                                             "body_digest": _sealed(body),
                                             **_writer(reader, cs)}), body)]
    if op.op_type in _MAKES[1:] and op.result:
        target = reader.head(op.target or "")
        made: RecordBody | None = None
        if "content" in payload or target is None:
            made = _body(payload, op.result)
            digest = _sealed(made)
        else:  # the corrected record keeps its target's words: the very same body
            digest = target.body_digest
        add = Step(Op("add_record", None, {"record_id": op.result, "body_digest": digest,
                                           **_writer(reader, cs)}), made)
        return [add, *_forget(reader, cs, op.target)]
    if op.op_type == "mark_duplicate":
        return _forget(reader, cs, payload.get("duplicate_id"))
    if op.op_type == "add_relationship":
        to = str(payload.get("to_memory_id", ""))
        rel = str(payload.get("kind", ""))
        return _revise(reader, cs, payload.get("from_memory_id"), lambda b: replace(
            b, references=(*b.references, Reference(rel, cs.memory_id, to))))
    if op.op_type in _REVISES[:2] and op.target:
        name = "evidence" if op.op_type == "attach_evidence" else "verification"
        item = {k: payload[k] for k in ("kind", "source", "note", "status") if k in payload}
        return _revise(reader, cs, op.target, lambda b: replace(b, attributes={
            **b.attributes, name: [*b.attributes.get(name, []), item]}))
    if op.op_type == "propose_deprecation":
        reason = payload.get("reason")
        return _revise(reader, cs, op.target, lambda b: replace(b, attributes={
            **b.attributes, "deprecation_proposed": reason}))
    return []


def _forget(reader: Reader, cs: Changeset, record_id: str | None) -> list[Step]:
    head = reader.head(record_id or "")
    if head is None or head.status != "active" or head.memory_id != cs.memory_id:
        return []
    return [Step(Op("forget_record", record_id, _writer(reader, cs)))]


def _revise(reader: Reader, cs: Changeset, record_id: str | None,
            change: Callable[[RecordBody], RecordBody]) -> list[Step]:
    """A new version of an active record of this memory with ``change`` applied to its body."""
    head = reader.head(record_id or "")
    if head is None or head.status != "active" or head.memory_id != cs.memory_id:
        return []  # not an accepted record here (e.g. erased): nothing to overlay
    stored = reader.body(head.body_digest)
    if stored is None:
        return []  # erased or damaged bytes: never resurrect content
    body = change(stored)
    return [Step(Op("revise_record", record_id, {"body_digest": _sealed(body),
                                                 **_writer(reader, cs)}), body)]


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


__all__ = ["Reader", "Step", "carriers", "fields_of", "steps"]
