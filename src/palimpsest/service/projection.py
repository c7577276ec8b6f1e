"""The one projection of history into records — pure.

Every op of every changeset, a UHP record write (``add_record``, ``revise_record``,
``forget_record``, ``erase_record``) or a Memory Git op (memory-git.md §4), goes through
:func:`apply`: given the entries of the records it touches (a :class:`State`), it returns what
changes (:class:`Change`): each touched record's new :class:`Entry`, and for a record whose
content changed the new :class:`Version`. Two views read the one projection:

- the **record projection** of ``refs/shared/main`` (:meth:`palimpsest.service.core.Core.apply`
  over the store): versions, statuses, the search index — what UHP get, list and recall
  return; it reads entries from the stored records and writes the versions;
- **Memory Git's accepted memory at any head** (``memory-context/v1``,
  :mod:`palimpsest.service.memorygit.projection`): entries held in memory while the
  changesets reachable from the head are replayed, shown by :meth:`Entry.to_wire`.

How a Memory Git op reads as records:

- ``add_memory``: a new record (id = the memory id), type ``fact`` for facts else ``note``;
- ``correct_memory``, ``supersede_memory``: a new record for the result, its fields the
  target's corrected (a correction keeps what it does not restate); the target is retired
  (``corrected`` / ``superseded``; a UHP reader sees it forgotten, its trace kept);
- ``mark_duplicate``: the duplicate is retired (``duplicate``);
- ``add_relationship``: a new version of the *from* record with one more reference
  ``{rel: kind, record_id: to}``;
- ``attach_evidence`` / ``attach_verification`` with a target: a new version whose
  ``attributes.evidence`` / ``attributes.verification`` gains the item;
- ``propose_deprecation``: a new version with ``attributes.deprecation_proposed`` = the reason
  (the record stays active).

A Memory Git op's payload is kept apart from its changeset's canonical bytes; one whose payload
was erased still counts for what the op names itself (the memory it made stands ``erased``, a
correction still retires its target). A record body made here names the values it was derived
from (``Version.bases``: the payload, the version it revises), so the store keeps the words
once. Nothing here draws on a clock, a salt or a random id: a rebuild makes the same rows.

``strict`` (a changeset about to be stored, and Memory Git's replays) refuses an op that
breaks a rule of §4; the record projection of accepted history is not strict, since it holds
only what ``refs/shared/main`` kept (an op whose target it no longer holds changes nothing of
that target).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

from palimpsest.errors import InvalidInput
from palimpsest.service import history
from palimpsest.service.memorygit.ops import KINDS, LOW_TRUST, STANDING_TAG, VISIBILITIES
from palimpsest.service.model import (
    Changeset,
    ContentPart,
    Member,
    Op,
    Principal,
    RecordBody,
    Reference,
)
from palimpsest.text import trim_space

MEMORY_FIELDS: Final = ("content", "event_type", "kind", "scope", "visibility", "tags",
                        "confidence")
UHP_OPS: Final = frozenset({"add_record", "revise_record", "forget_record", "erase_record"})
MAKES: Final = ("add_memory", "correct_memory", "supersede_memory")
REVISES: Final = ("attach_evidence", "attach_verification", "propose_deprecation")
_CORRECTION_KEYS: Final = frozenset({"content", "kind", "event_type", "scope", "visibility",
                                     "tags", "confidence", "fact_key", "subject", "valid_from",
                                     "valid_to", "protected", "approval"})
# payload keys a merged record keeps among its attributes (beside its fields and its id)
_ATTRIBUTES: Final = ("kind", "scope", "visibility", "tags", "confidence", "fact_key",
                      "subject", "approval")
_ITEM_KEYS: Final = ("kind", "source", "note", "status")
_PROVENANCE: Final = frozenset({"reviewer", "proposal_id", "source_changeset_id",
                                "rejected_from", "cherrypicked_from", "left_branch",
                                "right_branch"})
EXTERNAL: Final = {"external": "uhp_record"}  # a UHP-written record, as Memory Git sees it


@dataclass(frozen=True, slots=True)
class Entry:
    """One record in the projection (Memory Git calls it a memory; ``memory_id`` is the
    record's id): its Memory Git facts and where its record view stands. Never changed in
    place; :func:`apply` returns new entries."""

    memory_id: str
    fields: Mapping[str, Any]
    status: str  # active | corrected | superseded | duplicate | forgotten | erased
    source: str
    introduced_changeset_id: str
    last_changeset_id: str
    changed_seq: int
    source_event_id: str | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)
    evidence: tuple[Mapping[str, Any], ...] = ()
    verification: tuple[Mapping[str, Any], ...] = ()
    # the record view: the memory holding it, its versions so far and the body of the last
    home: str = ""
    version: int = 0
    body_digest: str | None = None

    @property
    def trust(self) -> str:
        """``user_approved`` when approved by a person, else the stated source trust."""
        if self.payload.get("approval") == "user_approved":
            return "user_approved"
        return str(self.payload.get("source_trust", ""))

    @property
    def external(self) -> bool:
        """Written through UHP (Memory Git tracks its id and status, not its content)."""
        return "external" in self.payload

    def to_wire(self) -> dict[str, Any]:
        """``AcceptedMemory`` (memory-git.md §8): the Memory Git view of the entry."""
        out: dict[str, Any] = {"memory_id": self.memory_id,
                               "content": self.fields.get("content", "")}
        for name in MEMORY_FIELDS[1:]:
            if name in self.fields:
                out[name] = self.fields[name]
        out.update({"status": self.status, "source": self.source})
        if self.source_event_id:
            out["source_event_id"] = self.source_event_id
        out["introduced_changeset_id"] = self.introduced_changeset_id
        out["last_changeset_id"] = self.last_changeset_id
        if self.evidence:
            out["evidence"] = [dict(e) for e in self.evidence]
        if self.verification:
            out["verification"] = [dict(v) for v in self.verification]
        if self.payload:
            out["payload"] = dict(self.payload)
        return out


@dataclass(frozen=True, slots=True)
class Version:
    """A new version of the record: its body (``None`` when the op names a body already
    stored, a UHP write's), the stored values it was derived from, and its writer fields."""

    body_digest: str
    body: RecordBody | None
    bases: tuple[str, ...]
    writer: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Change:
    """What one op did to one record. ``retired_at``: when it left the active records (a UHP
    reader sees it forgotten from then on); ``erased``: its bytes go; ``relationship``: a
    Memory Git relationship the op added (from this record)."""

    entry: Entry
    version: Version | None = None
    retired_at: str | None = None
    erased: bool = False
    relationship: Mapping[str, Any] | None = None


class State(Protocol):
    """The entries an op reads (the stored records, or a replay held in memory)."""

    @property
    def project(self) -> str:
        """The memory whose history this is."""

    def entry(self, record_id: str) -> Entry | None:
        """The record's entry in this memory (``None``: the projection holds none)."""

    def body(self, entry: Entry) -> RecordBody | None:
        """The record's current body (``None``: erased, damaged, or not kept here)."""

    def member(self, member_id: str) -> Member | None:
        """A member, for a complete ``written_by``."""


def _reject(op: Op, message: str) -> InvalidInput:
    return InvalidInput(f"op {op.op_type}: {message}", code="invalid-op")


def _touch(entry: Entry, cs: Changeset, seq: int, **changes: Any) -> Entry:
    return replace(entry, last_changeset_id=cs.id, changed_seq=seq, **changes)


def _writer(state: State, cs: Changeset) -> dict[str, Any]:
    """``written_by`` of a merged version: the author of its changeset, complete with the
    member's type, exactly as a direct write stamps it."""
    kind, _, ident = cs.author.partition(":")
    member = state.member(ident) if kind == "member" and ident else None
    if member is not None:
        who = member.principal
    elif kind in ("member", "group") and ident:
        who = Principal(kind, ident)
    else:
        who = Principal("provider", cs.author)
    return history.writer_payload(cs.created_at, who)


def record_body(fields: Mapping[str, Any], payload: Mapping[str, Any],
                record_id: str) -> RecordBody:
    """The record body of a memory: its fields, and the payload's summary, validity and
    attributes."""
    attributes: dict[str, Any] = {k: fields[k] for k in _ATTRIBUTES if k in fields}
    attributes.update({k: payload[k] for k in _ATTRIBUTES if k in payload and k not in fields})
    attributes["memory_git_id"] = record_id
    if STANDING_TAG in (attributes.get("tags") or ()):
        attributes["standing"] = True  # a reviewed standing write stands in the prime
    summary = payload.get("summary")
    return RecordBody(
        type="fact" if fields.get("kind") == "fact" else "note",
        title=summary[:300] if isinstance(summary, str) and summary else None,
        content=(ContentPart("text", text=str(fields.get("content", ""))),),
        attributes=attributes, references=(),
        valid_from=payload.get("valid_from"), valid_to=payload.get("valid_to"))


def fields_of(body: RecordBody) -> dict[str, Any]:
    """The Memory Git fields a merged record's body holds (the inverse of
    :func:`record_body` for what a record view keeps)."""
    out: dict[str, Any] = {"content": body.content[0].text if body.content else ""}
    out.update({k: body.attributes[k] for k in MEMORY_FIELDS[1:] if k in body.attributes})
    return out


def before_values(body: RecordBody) -> dict[str, Any]:
    """A record's values under the Memory Git field names its ops set (``content``,
    ``summary``, validity and the attributes :func:`record_body` keeps): what a reviewer reads
    beside a correction of it, whoever wrote the record."""
    out: dict[str, Any] = {"content": "\n".join(p.words for p in body.content if p.words)}
    if body.title:
        out["summary"] = body.title
    for name in (*_ATTRIBUTES, "valid_from", "valid_to"):
        value = body.attributes.get(name) if name in _ATTRIBUTES else getattr(body, name)
        if value is not None:
            out[name] = value
    return out


def _version(state: State, cs: Changeset, body: RecordBody,
             bases: Iterable[str | None]) -> Version:
    return Version(history.seal_body(body)[0], body, tuple(b for b in bases if b),
                   _writer(state, cs))


def _existing(state: State, op: Op, record_id: Any, what: str, strict: bool) -> Entry | None:
    found = state.entry(record_id) if isinstance(record_id, str) and record_id else None
    if found is None and strict:
        if not record_id:
            raise _reject(op, f"{what} is required")
        raise _reject(op, f"{what} {record_id!r} does not exist at the parent")
    return found


def _made(op: Op, cs: Changeset, seq: int, base: Mapping[str, Any] | None,
          source_event: str | None, *, strict: bool) -> Entry:
    payload = dict(op.payload or {})
    fields_ = dict(base or {})
    for name in MEMORY_FIELDS:
        if name in payload:
            fields_[name] = payload[name]
    if strict:
        content = fields_.get("content", "")
        if not isinstance(content, str) or not trim_space(content):
            raise _reject(op, "content must be non-empty")
        if "kind" in fields_ and fields_["kind"] not in KINDS:
            raise _reject(op, f"kind must be one of {', '.join(KINDS)}")
        if "visibility" in fields_ and fields_["visibility"] not in VISIBILITIES:
            raise _reject(op, f"visibility must be one of {', '.join(VISIBILITIES)}")
        if "scope" in fields_ and not trim_space(str(fields_["scope"])):
            raise _reject(op, "scope must be a non-empty string")
    if not op.result:  # assigned by gitops.assign_ids before anything is applied
        raise _reject(op, "has no resulting_event_id")
    return Entry(op.result, fields_, "active", cs.author, cs.id, cs.id, seq, source_event,
                 payload, home=cs.memory_id)


def _revised(state: State, cs: Changeset, entry: Entry, seq: int | None,
             change: Callable[[RecordBody], RecordBody], *, bases: Iterable[str | None],
             **facts: Any) -> Change:
    """``entry`` with its Memory Git ``facts`` changed (and touched by this changeset when
    ``seq`` is given) and, when it is an active record whose body is readable, a new version
    with ``change`` applied to the body."""
    new = _touch(entry, cs, seq, **facts) if seq is not None else replace(entry, **facts)
    stored = state.body(entry) if entry.status == "active" else None
    if stored is None:
        return Change(new)  # not an active record here, or bytes erased: never resurrect
    version = _version(state, cs, change(stored), (entry.body_digest, *bases))
    return Change(replace(new, version=entry.version + 1, body_digest=version.body_digest),
                  version)


def _retire(entry: Entry, cs: Changeset, seq: int, status: str, at: str | None = None,
            **facts: Any) -> Change:
    return Change(_touch(entry, cs, seq, status=status, **facts),
                  retired_at=(at or cs.created_at) if entry.status == "active" else None)


def apply(state: State, cs: Changeset, op: Op, seq: int, *, strict: bool = True
          ) -> list[Change]:
    """What ``op`` of ``cs`` changes, given the entries it touches; ``seq`` numbers the op in
    the replay (Memory Git ranks recent changes first). See the module docs.

    Raises:
        InvalidInput: ``strict`` and the op breaks a rule (missing target, self-supersede,
            lower trust, …); or the op makes a record that exists already.
    """
    if op.op_type in UHP_OPS:
        return _record_op(state, cs, op, seq)
    if op.payload is None:
        return _erased_payload(state, cs, op, seq)
    payload = dict(op.payload)
    if payload.get("project_id", state.project) != state.project:
        raise _reject(op, "targets another project")
    kind = op.op_type
    if kind == "add_memory":
        new = _made(op, cs, seq, None, None, strict=strict)
        if state.entry(new.memory_id) is not None:
            raise _reject(op, f"memory {new.memory_id!r} already exists")
        return [_first(state, cs, new, (op.payload_digest,))]
    if kind in ("correct_memory", "supersede_memory"):
        return _correct(state, cs, op, payload, seq, strict=strict)
    if kind == "mark_duplicate":
        dup_id, of_id = payload.get("duplicate_id"), payload.get("duplicate_of")
        dup = _existing(state, op, dup_id, "duplicate_id", strict)
        _existing(state, op, of_id, "duplicate_of", strict)
        if strict and dup_id == of_id:
            raise _reject(op, "a memory cannot duplicate itself")
        if dup is None:
            return []
        return [_retire(dup, cs, seq, "duplicate",
                        payload={**dup.payload, "duplicate_of": of_id})]
    if kind == "add_relationship":
        return _relate(state, cs, op, payload, strict=strict)
    if kind == "propose_deprecation":
        target = _existing(state, op, op.target, "target_event_id", strict)
        reason = payload.get("reason")
        if strict and not trim_space(str(reason or "")):
            raise _reject(op, "reason must be non-empty")
        if target is None:
            return []
        return [_revised(state, cs, target, seq, lambda b: replace(b, attributes={
            **b.attributes, "deprecation_proposed": reason}), bases=(op.payload_digest,),
            payload={**target.payload, "deprecation_proposed": reason})]
    return _attach(state, cs, op, payload, seq, strict=strict)


def _first(state: State, cs: Changeset, new: Entry, bases: Iterable[str | None]) -> Change:
    """A memory's record: version 1 of the body its fields and payload make."""
    version = _version(state, cs, record_body(new.fields, new.payload, new.memory_id), bases)
    return Change(replace(new, version=1, body_digest=version.body_digest), version)


def _correct(state: State, cs: Changeset, op: Op, payload: dict[str, Any], seq: int, *,
             strict: bool) -> list[Change]:
    kind = op.op_type
    target = _existing(state, op, op.target, "target_event_id", strict)
    if strict and target is not None:  # (a strict read refused a missing target)
        if op.result == target.memory_id:
            raise _reject(op, "the result must differ from the target")
        if kind == "correct_memory" and not (_CORRECTION_KEYS & set(payload)):
            raise _reject(op, "a correction needs at least one corrected field")
        if (kind == "supersede_memory" and payload.get("source_trust") in LOW_TRUST
                and target.trust == "user_approved"):
            raise _reject(op, "an inference cannot replace user-approved memory")
    if op.result and state.entry(op.result) is not None:
        raise _reject(op, f"memory {op.result!r} already exists")
    keeps = target is not None and (kind == "correct_memory" or "content" not in payload)
    new = _made(op, cs, seq, target.fields if keeps and target else None,
                target.memory_id if target else op.target, strict=strict)
    out = [_first(state, cs, new, (op.payload_digest, target.body_digest if keeps and target
                                   else None))]
    if target is not None:
        status = "corrected" if kind == "correct_memory" else "superseded"
        out.append(_retire(target, cs, seq, status))
    return out


def _relate(state: State, cs: Changeset, op: Op, payload: dict[str, Any], *,
            strict: bool) -> list[Change]:
    src_id, dst_id = payload.get("from_memory_id"), payload.get("to_memory_id")
    src = _existing(state, op, src_id, "from_memory_id", strict)
    _existing(state, op, dst_id, "to_memory_id", strict)
    rel = str(payload.get("kind", ""))
    if strict and (src_id == dst_id or not trim_space(rel)):
        raise _reject(op, "needs two distinct memories and a non-empty kind")
    if src is None:
        return []
    link = {"from_memory_id": src_id, "to_memory_id": dst_id, "kind": payload.get("kind"),
            "changeset_id": cs.id}
    change = _revised(state, cs, src, None, lambda b: replace(
        b, references=(*b.references, Reference(rel, cs.memory_id, str(dst_id or "")))),
        bases=(op.payload_digest,))
    return [replace(change, relationship=link)]


def _attach(state: State, cs: Changeset, op: Op, payload: dict[str, Any], seq: int, *,
            strict: bool) -> list[Change]:
    item = {k: payload[k] for k in _ITEM_KEYS if k in payload}
    if not op.target:
        if strict and (not payload.get("summary") or not (_PROVENANCE & set(payload))):
            raise _reject(op, "an attestation without a target needs summary and provenance")
        return []
    target = _existing(state, op, op.target, "target_event_id", strict)
    if target is None:
        return []
    name = "evidence" if op.op_type == "attach_evidence" else "verification"
    held = target.evidence if name == "evidence" else target.verification
    return [_revised(state, cs, target, seq, lambda b: replace(b, attributes={
        **b.attributes, name: [*b.attributes.get(name, []), item]}), bases=(op.payload_digest,),
        **{name: (*held, {**item, "changeset_id": cs.id})})]


def _erased_payload(state: State, cs: Changeset, op: Op, seq: int) -> list[Change]:
    """An op whose payload was erased: what it names itself still counts (the memory it made
    stands ``erased``; a correction or supersession still retires its target)."""
    if op.op_type not in MAKES or not op.result:
        return []
    out = []
    target = state.entry(op.target or "") if op.op_type != "add_memory" else None
    if target is not None:
        status = "corrected" if op.op_type == "correct_memory" else "superseded"
        out.append(_retire(target, cs, seq, status))
    out.append(Change(Entry(op.result, {}, "erased", cs.author, cs.id, cs.id, seq,
                            payload={"erased": True}, home=cs.memory_id)))
    return out


def _record_op(state: State, cs: Changeset, op: Op, seq: int) -> list[Change]:
    """A UHP write: its payload names the body by digest and carries the writer."""
    p = dict(op.payload or {})
    writer: dict[str, Any] = {k: p[k] for k in history.WRITER_KEYS if k in p}
    if op.op_type == "add_record":
        rid = str(p.get("record_id", ""))
        entry = Entry(rid, {}, "active", cs.author, cs.id, cs.id, seq, payload=dict(EXTERNAL),
                      home=cs.memory_id, version=1, body_digest=p["body_digest"])
        return [Change(entry, Version(p["body_digest"], None, (), writer))]
    target = state.entry(op.target or "")
    if target is None:
        return []  # history the projection never saw (erased since): nothing to overlay
    if op.op_type == "revise_record":
        entry = _touch(target, cs, seq, status="active", version=target.version + 1,
                       body_digest=p["body_digest"])
        return [Change(entry, Version(p["body_digest"], None, (), writer))]
    if op.op_type == "forget_record":
        return [_retire(target, cs, seq, "forgotten", at=p.get("written_at"))]
    return [Change(_touch(target, cs, seq, status="erased", fields={}, evidence=(),
                          verification=()), erased=True)]


def carriers(changesets: Iterable[Changeset], record_id: str) -> tuple[list[str], set[str]]:
    """Where a record's bytes live in Memory Git history: the digests of the payloads that
    made or revised it (on any ref), and the record ids those ops name (stored responses
    naming them may carry the bytes too). A record a cherry-pick made has the memory it was
    picked from as a second name: what made or revised that one (on its branch) goes too."""
    by_id = {cs.id: cs for cs in changesets}
    found: dict[str, None] = {}
    names = {record_id}
    picked: set[str] = set()  # the ops already followed to their source
    todo = True
    while todo:  # until no cherry-pick names another source
        todo = False
        for cs in by_id.values():
            for op in cs.ops:
                if op.payload_digest is None or op.payload is None or not _carries(op, names):
                    continue
                found[op.payload_digest] = None
                source = op.payload.get("cherrypicked_from")
                if isinstance(source, str) and source in by_id and op.payload_digest not in picked:
                    picked.add(op.payload_digest)
                    for o in _picked_from(by_id[source], op):
                        found[str(o.payload_digest)] = None
                        if o.result and o.result not in names:
                            names.add(o.result)
                            todo = True
    return list(found), names


def _carries(op: Op, names: set[str]) -> bool:
    """Whether ``op`` made, revised or related from a record named in ``names``."""
    return ((op.op_type in MAKES and op.result in names)
            or (op.op_type in REVISES and op.target in names)
            or (op.op_type == "add_relationship"
                and (op.payload or {}).get("from_memory_id") in names))


def _picked_from(source: Changeset, op: Op) -> list[Op]:
    """The ops of ``source`` that a cherry-picked ``op`` was derived from (same type, target
    and payload, less the ids the pick assigns anew)."""
    want = {k: v for k, v in (op.payload or {}).items() if k != "cherrypicked_from"}
    return [o for o in source.ops
            if o.payload is not None and o.payload_digest is not None
            and (o.op_type, o.target) == (op.op_type, op.target)
            and {k: v for k, v in o.payload.items()
                 if k not in ("memory_id", "event_id")} == want]


def erasure(changesets: Iterable[Changeset], record_ids: Iterable[str],
            held: Callable[[str], bool]) -> tuple[list[str], set[str], set[str]]:
    """What erasing ``record_ids`` (held records) can take from Memory Git history:
    ``(payload digests, record ids stored responses may name, records whose words stay)``.

    A correction (or a supersession that restates no content) takes its target's fields: it
    is a record of its own, derived from the payloads that made its target. While such an
    heir is held, those payloads stay — the target's words are still in a record — so the
    target is reported unreachable; once the last heir is erased, the payloads of the erased
    records it was derived from go with it."""
    every = list(changesets)
    parent: dict[str, str] = {}
    children: dict[str, set[str]] = {}
    for cs in every:
        for op in cs.ops:
            if op.result and op.target and (op.op_type == "correct_memory" or (
                    op.op_type == "supersede_memory" and "content" not in (op.payload or {}))):
                parent[op.result] = op.target
                children.setdefault(op.target, set()).add(op.result)
    going = set(record_ids)

    def gone(rid: str) -> bool:
        return rid in going or not held(rid)

    def heirs_gone(rid: str) -> bool:
        todo, seen = [rid], {rid}
        while todo:
            for heir in children.get(todo.pop(), ()):
                if heir not in seen:
                    if not gone(heir):
                        return False
                    seen.add(heir)
                    todo.append(heir)
        return True

    payloads: dict[str, None] = {}
    names: set[str] = set()
    kept: set[str] = set()
    for rid in going:
        if not heirs_gone(rid):
            kept.add(rid)
            names |= carriers(every, rid)[1]
            continue
        line, seen = rid, set()
        while line not in seen:  # the record, then the erased records it was derived from
            seen.add(line)
            found, named = carriers(every, line)
            payloads.update(dict.fromkeys(found))
            names |= named
            up = parent.get(line)
            if up is None or not gone(up) or not heirs_gone(up):
                break
            line = up
    return list(payloads), names, kept


__all__ = ["EXTERNAL", "MAKES", "MEMORY_FIELDS", "UHP_OPS", "Change", "Entry", "State",
           "Version", "apply", "before_values", "carriers", "erasure", "fields_of",
           "record_body"]
