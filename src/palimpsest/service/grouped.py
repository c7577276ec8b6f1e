"""Group commit of concurrent ``remember`` calls: several writes, one SQLite transaction.

A commit costs a fixed price however little it carries — the WAL frames of every page touched,
and a new FTS5 segment (FTS5 flushes its pending terms once per transaction). When several
clients write at once, the HTTP face hands the writes that queued up while the previous one
ran to :func:`remember_group`, which runs them in one ``BEGIN IMMEDIATE`` transaction. What
each write promises is unchanged:

- **its own changeset and CAS outcome**: every write runs the ordinary ``records.remember``
  path — idempotency lookup, access check, one changeset appended to ``refs/shared/main`` on the
  head the previous write of the group left, projection and index — in arrival order;
- **acknowledged only when durable**: outcomes are returned after the group's ``COMMIT``; if
  the commit fails, nothing of the group stayed and every write is run again alone;
- **a failure of one never loses or mixes another**: a write that is refused before it changed
  a row (bad body, unknown memory, no privilege, idempotency mismatch — the usual refusals)
  just gets its error; a write that fails after changing rows, or fails in any other way,
  abandons the whole group, whose writes are then each run alone in their own transaction,
  exactly as without grouping;
- a write into a memory that requires review (Memory Git) is never grouped: it is run alone
  after the group, through the facade.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from palimpsest.errors import PalError
from palimpsest.service.core import Core
from palimpsest.service.model import Caller, Wire
from palimpsest.service.ops import records


class RememberCall(NamedTuple):
    """One ``remember`` as the facade takes it."""

    caller: Caller
    memory_id: str
    body: Wire
    idempotency_key: str | None


Outcome = Wire | Exception
Solo = Callable[[RememberCall], Wire]
NeedsReview = Callable[[str, str], bool]


def run_alone(solo: Solo, call: RememberCall) -> Outcome:
    """One write in its own transaction; its error is its outcome."""
    try:
        return solo(call)
    except Exception as exc:  # handed to exactly this request's caller
        return exc


def remember_group(core: Core, needs_review: NeedsReview, solo: Solo,
                   calls: Sequence[RememberCall]) -> list[Outcome]:
    """Outcomes of ``calls`` (results or the errors to raise), in order, after they are
    durable. ``solo`` is the facade's ``remember`` (one write, one transaction)."""
    if len(calls) <= 1:
        return [run_alone(solo, c) for c in calls]
    outcomes: list[Outcome | None] = [None] * len(calls)
    store = core.store
    try:
        with store.write():
            review: dict[tuple[str, str], bool] = {}  # settings cannot change inside this tx
            for i, call in enumerate(calls):
                where = (call.memory_id, call.caller.member.type)
                if where not in review:
                    review[where] = needs_review(*where)
                if review[where]:
                    continue  # run alone below, through the review gate
                before = store.changes()
                try:
                    outcomes[i] = records.remember(core, call.caller, call.memory_id, call.body,
                                                   call.idempotency_key)
                except PalError as exc:
                    if store.changes() != before:
                        raise _Abandon from exc  # rows of this write would have to be undone
                    outcomes[i] = exc
    except Exception:  # nothing of the group committed: each write runs alone
        return [run_alone(solo, c) for c in calls]
    return [o if o is not None else run_alone(solo, c) for o, c in zip(outcomes, calls,
                                                                         strict=True)]


class _Abandon(Exception):
    """Internal: roll the group back and run its writes alone."""


__all__ = ["Outcome", "RememberCall", "remember_group", "run_alone"]
