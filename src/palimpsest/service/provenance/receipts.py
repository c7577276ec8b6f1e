"""Receipts on what the service returns: gathered from the history, signed by the server.

``include: ["provenance"]`` on get, list, recall, graph and prime (and the MCP tools) asks for
them: every record in the answer then carries ``provenance``, a receipt
(:mod:`.receipt`) — the changeset that made its version with its canonical bytes and
signatures, the writer, and for a version admitted by review the proposal, originator,
reviewer, merger and merge authorization of the advance that brought it onto
``refs/shared/main``.

Which advance admitted a changeset is found by walking the protected ref's advance ledger
forward, once per advance: each advance admits what its new head reaches that the history
before it did not. The walk is kept per memory and extended as advances are added.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from palimpsest.service import history, mounts
from palimpsest.service.core import Core
from palimpsest.service.model import SHARED_MAIN, Caller, Wire, invalid
from palimpsest.service.provenance import receipt
from palimpsest.service.provenance.keys import ServerKeys
from palimpsest.service.storage.protocol import ReviewStore

PROVENANCE = "provenance"
INCLUDE_WORDS = ("active", "all", PROVENANCE)


def split_include(value: Any) -> tuple[Any, bool]:
    """``include`` as a string (``active``, ``all``; comma-separated in a query) or a list:
    the status part the operation already knows, and whether receipts were asked for.

    Raises:
        InvalidInput: memory_invalid for a word outside ``active``, ``all``, ``provenance``.
    """
    if value is None:
        return None, False
    if isinstance(value, str):
        words = [w for w in value.split(",") if w]
    elif isinstance(value, list) and all(isinstance(w, str) for w in value):
        words = list(value)
    else:
        raise invalid("include must be a string or a list of strings")
    for w in words:
        if w not in INCLUDE_WORDS:
            raise invalid(f"include: unknown value {w!r}",
                          hint="allowed: active, all, provenance")
    status = "all" if "all" in words else ("active" if "active" in words else None)
    return status, PROVENANCE in words


@dataclass
class _Admitted:
    """The advances of one memory's ``refs/shared/main`` walked so far."""

    advances: int = 0
    seen: set[str] = field(default_factory=set)
    by: dict[str, Wire] = field(default_factory=dict)


class Receipts:
    """Receipts over one service's store, signed by its key."""

    def __init__(self, core: Core, keys: ServerKeys, review: Callable[[], ReviewStore]) -> None:
        self._core = core
        self._keys = keys
        self._review = review
        self._lock = threading.Lock()
        self._admitted: dict[str, _Admitted] = {}
        self._bytes: OrderedDict[str, bytes] = OrderedDict()

    def attach(self, caller: Caller, answer: Wire) -> Wire:
        """Add ``provenance`` to every record object in ``answer`` (and, for a prime, a
        receipt per standing record it placed)."""
        with self._core.store.read():
            for record in _records(answer):
                # A mounted repository's memory carries its own signature, not a changeset.
                record[PROVENANCE] = mounts.provenance(record) if mounts.is_mounted_record(
                    record) else self.for_record(record)
            if answer.get("object") == "memory.prime":
                answer[PROVENANCE] = [self._current(caller, str(answer["memory_id"]), rid)
                                      for rid in answer.get("records", ())]
        return answer

    def _current(self, caller: Caller, memory_id: str, record_id: str) -> Wire:
        head = self._core.store.record_head(record_id)
        row = self._core.store.version_row(record_id, head.version) if head else None
        if row is None:
            raise invalid("a primed record is gone; prime again")
        view = self._core.view(caller)
        rendered = self._core.render(view, self._core.version(row))
        return self.for_record(rendered)

    def for_record(self, record: Wire) -> Wire:
        """The signed receipt of one rendered record."""
        store = self._core.store
        row = store.version_row(str(record["id"]), int(record["version"]))
        if row is None:
            raise invalid("the record's version is not in this memory's history")
        data, ref_name, op = self._made_of(row.changeset_id, str(record["id"]))
        sigs = tuple(store.signatures([row.changeset_id]).get(row.changeset_id, ()))
        review = self.review_of(str(record["memory_id"]), row.changeset_id) \
            if ref_name != SHARED_MAIN else None
        made = receipt.Made(row.changeset_id, ref_name, data, op, row.body_digest, sigs, review)
        return receipt.build(record, made, self._core.now_iso(), self._keys.active())

    def _made_of(self, cid: str, record_id: str) -> tuple[bytes, str, int]:
        cs = self._core.store.changeset(cid)
        if cs is None:
            raise invalid("the changeset of this version is missing; run pal admin rebuild")
        history.verify(cs)
        data = self._bytes.get(cid)
        if data is None:
            data = history.canonical_bytes(cs)
            with self._lock:
                self._bytes[cid] = data
                if len(self._bytes) > 4096:
                    self._bytes.popitem(last=False)
        for i, op in enumerate(cs.ops):
            wire = op.canonical(i)
            payload = wire.get("payload") or {}
            if record_id in (op.target, op.result, payload.get("record_id")):
                return data, cs.ref_name, i
        return data, cs.ref_name, 0

    def review_of(self, memory_id: str, cid: str) -> Wire | None:
        """How the advance that admitted ``cid`` onto ``refs/shared/main`` was authorised
        (``None``: no review admitted it)."""
        review = self._review()
        with self._lock:
            state = self._admitted.setdefault(memory_id, _Admitted())
            ledger = review.advances(memory_id, SHARED_MAIN)
            for adv in ledger[state.advances:]:
                if not state.seen and adv.get("expected_head"):
                    state.seen |= self._ancestry(str(adv["expected_head"]), set())
                reached = self._ancestry(str(adv["new_head"]), state.seen)
                proposal = review.proposal(str(adv.get("merge_proposal_id"))) or {}
                info = {"proposal_id": adv.get("merge_proposal_id"),
                        "originator": proposal.get("originator_principal"),
                        "reviewer": adv.get("reviewer_principal"),
                        "merger": adv.get("merger_principal"),
                        "merge_authorization_id": adv.get("authorization_nonce"),
                        "advance_id": adv.get("advance_id"), "strategy": adv.get("strategy"),
                        "admitted_at": adv.get("created_at")}
                for c in reached:
                    state.by.setdefault(c, info)
                state.seen |= reached
            state.advances = len(ledger)
            return state.by.get(cid)

    def _ancestry(self, head: str, stop: set[str]) -> set[str]:
        out: set[str] = set()
        stack = [head]
        while stack:
            c = stack.pop()
            if c in out or c in stop:
                continue
            cs = self._core.store.changeset(c)
            if cs is None:
                continue
            out.add(c)
            stack.extend(cs.parent_ids)
        return out


def _records(value: Any) -> Iterable[Wire]:
    """Every record object inside an answer (recall results, graph nodes, list pages)."""
    if isinstance(value, dict):
        if value.get("object") == "memory.record":
            yield value
            return
        for v in value.values():
            yield from _records(v)
    elif isinstance(value, list):
        for v in value:
            yield from _records(v)


__all__ = ["INCLUDE_WORDS", "PROVENANCE", "Receipts", "split_include"]
