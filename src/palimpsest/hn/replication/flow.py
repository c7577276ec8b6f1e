"""Repo memory replication: select, sync, quarantine, validate, promote, publish (§20).

Trust rule (requirements 001, "Import boundary"): remote memory is never a recall source while it
is quarantined.  A sync fetches exactly the selected, uniquely owned streams into a throw-away
bare quarantine repository, measures them against the selection's budgets, verifies them with the
*same* reader as local streams (:func:`palimpsest.hn.store.load_stream`: trees, payloads,
signatures, continuity, owner agreement) and the same projection (lifecycle relationships,
anchors, evidence), and only then promotes the valid heads to
``refs/hn/remotes/<remote>/memory/<actor>/<stream hex>`` in one atomic ref transaction.

Each selected stream gets exactly one outcome: ``over-budget``, ``structurally-invalid``,
``dependency-missing``, ``relationship-invalid`` or ``promoted`` (``fetched`` and ``promotable``
are the intermediate states).  One bad stream never blocks an independent good one; a stream
that depends on a failed one fails with ``dependency-missing``.

Crash consistency: accepted refs move only in the final ``git update-ref --stdin`` transaction,
which Git aborts if the process dies before *commit*.  Leftover quarantines and transaction
records are cleaned at the start of the next sync, under an exclusive lock.  For tests, the
environment variable ``PAL_TEST_SYNC_KILL_AT=<phase>`` makes the process SIGKILL itself at that
phase (see :data:`PHASES` and docs/replication.md); it has no other effect.

Not done here: collaboration (``hn/0``) actor and proposal chains are not replicated, so actor
and proposal selectors import nothing and are reported as ``not-replicated``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

from palimpsest.errors import Conflict, InvalidInput
from palimpsest.hn import store
from palimpsest.hn.envelope import VerifiedMemory
from palimpsest.hn.policy import policy_context
from palimpsest.hn.projection import project
from palimpsest.hn.replication import transport as rgit
from palimpsest.hn.replication.report import (
    FAILED,
    Dependency,
    PublishOutcome,
    SelectorNote,
    StreamOutcome,
    SyncReport,
    over_budget,
    redact_url,
)
from palimpsest.hn.replication.selection import (
    Selection,
    ensure_private_dir,
    load_selection,
    save_selection,
    saved_selection_bytes,
    selection_file_name,
    selections_dir,
    validate_remote,
)
from palimpsest.hn.replication.txn import (
    KILL_ENV,
    PHASES,
    checkpoint,
    recover_leftovers,
    sync_lock,
    transaction_doc,
    transactions_dir,
    write_private,
)

Progress = Callable[[str, int, int], None]
# Missing objects of the project's own history, which --recover-shallow may fetch exactly.
_COMMIT_DEPENDENCIES = frozenset(("anchor-commit", "evidence-git"))


@dataclass(slots=True)
class _Work:
    """Mutable per-stream state while a sync runs (never leaves this module)."""

    item: rgit.AdvertisedRef
    accepted_ref: str
    previous_head: str | None
    status: str = "advertised"
    diagnostic: str = ""
    measurement: rgit.Measurement | None = None
    memories: tuple[VerifiedMemory, ...] = ()
    dependency: Dependency | None = None
    unchanged: bool = False
    missing_commits: set[str] = field(default_factory=set)  # anchors / git evidence not here

    def fail(self, status: str, diagnostic: str) -> None:
        self.status = status
        self.diagnostic = diagnostic

    def outcome(self) -> StreamOutcome:
        return StreamOutcome(
            stream=self.item.stream,
            actor=self.item.actor,
            status=self.status,
            diagnostic=self.diagnostic,
            remote_head=self.item.oid,
            accepted_ref=self.accepted_ref,
            previous_head=self.previous_head or "",
            unchanged=self.unchanged,
            measurement=self.measurement,
            dependency=self.dependency,
        )


def _accepted_prefix(remote: str) -> str:
    return f"refs/hn/remotes/{remote}/memory/"


def _load_base(
    repo: pygit2.Repository, replaced: set[str]
) -> dict[str, tuple[VerifiedMemory, ...]]:
    """Every verified local and accepted stream except the refs this sync may replace.

    A stream that fails verification locally is left out (it is not this sync's to judge).
    """
    base: dict[str, tuple[VerifiedMemory, ...]] = {}
    try:
        refs = store.list_memory_refs(repo)
    except InvalidInput:
        refs = []
    for ref in refs:
        if ref.name in replaced:
            continue
        try:
            base[ref.name] = store.load_stream(repo, ref)
        except InvalidInput:
            continue
    return base


def _first_difference(old: tuple[VerifiedMemory, ...], new: tuple[VerifiedMemory, ...]) -> str:
    """Why ``new`` does not extend ``old`` (fork or rollback), or ``""`` when it does."""
    for position, (left, right) in enumerate(zip(old, new, strict=False), start=1):
        if left.memory_id != right.memory_id:
            return f"fork: the remote holds a different entry at sequence {position}"
    if len(new) < len(old):
        return f"rollback: the remote stream has {len(new)} entries, {len(old)} were accepted"
    return ""


def _validate(
    quarantine_repo: pygit2.Repository,
    main_repo: pygit2.Repository,
    work: list[_Work],
    progress: Progress | None,
    *,
    max_events: int,
) -> None:
    """Structural checks per stream, then relationship checks over accepted ∪ candidates."""
    candidates = [w for w in work if w.status == "fetched"]
    if not candidates:
        return
    base = _load_base(main_repo, {w.accepted_ref for w in candidates})
    for index, w in enumerate(candidates, start=1):
        if progress:
            progress("Verifying streams", index, len(candidates))
        ref = store.MemoryRef(
            name=f"{rgit.QUARANTINE_PREFIX}{w.item.actor}/{w.item.stream_hex}",
            actor=w.item.actor,
            stream=w.item.stream,
            head=w.item.oid,
        )
        try:
            w.memories = store.load_stream(quarantine_repo, ref, max_entries=max_events)
        except InvalidInput as exc:
            w.fail("structurally-invalid", exc.message)
            continue
        if w.previous_head and w.previous_head not in {m.commit for m in w.memories}:
            # not a fast-forward of the accepted head: load it only to name the sequence
            old = _accepted_stream(main_repo, w)
            reason = _first_difference(old, w.memories) if old is not None else ""
            if reason:
                w.fail("structurally-invalid", reason)
                continue
        w.status = "promotable"
    _check_relationships(quarantine_repo, main_repo, base, candidates)


def _accepted_stream(repo: pygit2.Repository, w: _Work) -> tuple[VerifiedMemory, ...] | None:
    ref = store.MemoryRef(w.accepted_ref, w.item.actor, w.item.stream, w.previous_head or "",
                          None)  # fmt: skip
    try:
        return store.load_stream(repo, ref)
    except InvalidInput:
        return None


def _check_relationships(
    quarantine_repo: pygit2.Repository,
    main_repo: pygit2.Repository,
    base: dict[str, tuple[VerifiedMemory, ...]],
    candidates: list[_Work],
) -> None:
    """Project accepted ∪ promotable streams; fail streams owning diagnostics or missing
    dependencies; repeat until nothing more fails, so failures propagate to dependants."""
    probe = store.RepoProbe(quarantine_repo)  # sees quarantine ∪ main objects (alternates)
    policy = policy_context("", None)
    stream_of = {w.item.stream: w for w in candidates}
    while True:
        live = [w for w in candidates if w.status == "promotable"]
        sources: list[tuple[VerifiedMemory, ...]] = list(base.values())
        for w in candidates:
            if w.status == "promotable":
                sources.append(w.memories)
            else:
                old = _accepted_stream(main_repo, w) if w.previous_head else None
                if old is not None:
                    sources.append(old)
        owner_of: dict[str, str] = {}
        for stream in sources:
            for memory in stream:
                owner_of.setdefault(memory.memory_id, memory.envelope.stream)
        projection = project(
            (m for stream in sources for m in stream), probe, at_commit=None, policy=policy
        )
        live_ids = {m.memory_id: w for w in live for m in w.memories}
        changed = False
        for diag in projection.diagnostics:
            hit = live_ids.get(diag.memory_id)
            if hit is not None and hit.status == "promotable":
                hit.fail("relationship-invalid", f"{diag.code}: memory {diag.memory_id} -> "
                       f"{diag.target_id or 'no target'}")  # fmt: skip
                changed = True
        for row in projection.rows:
            hit = live_ids.get(row.id)
            if hit is None or hit.status != "promotable":
                continue
            if row.applicability == "anchor-invalid":
                hit.fail("relationship-invalid", f"anchor of memory {row.id} is invalid")
                changed = True
            elif row.evidence == "invalid":
                hit.fail("relationship-invalid", f"evidence of memory {row.id} is invalid")
                changed = True
        for dep in projection.missing_dependencies:
            hit = live_ids.get(dep.owner_id)
            if hit is None:
                continue
            if dep.kind in _COMMIT_DEPENDENCIES:
                hit.missing_commits.add(dep.missing_id)
            if hit.status != "promotable":
                continue
            supplier = stream_of.get(owner_of.get(dep.missing_id, ""))
            selectors = (supplier.item.stream,) if supplier else ()
            required_ref = supplier.accepted_ref if supplier else ""
            recovery = (
                "run pal sync --recover-shallow after saving an exact selection"
                if dep.kind in _COMMIT_DEPENDENCIES
                else "select and sync the stream that holds the missing memory"
            )
            hit.dependency = hit.dependency or Dependency(
                kind=dep.kind,
                missing_id=dep.missing_id,
                owner_memory_id=dep.owner_id,
                owner_stream=dep.stream,
                required_selectors=selectors,
                required_ref=required_ref,
                recovery=recovery,
            )
            hit.fail("dependency-missing", f"{dep.kind} {dep.missing_id} is unavailable "
                   f"({dep.reason})")  # fmt: skip
            changed = True
        if not changed:
            return


def _select_streams(
    selection: Selection, advertisement: rgit.Advertisement, remote: str, accepted: dict[str, str]
) -> tuple[list[_Work], list[StreamOutcome]]:
    """Turn the selection into fetch requests and immediate outcomes (§20.2)."""
    work: list[_Work] = []
    early: list[StreamOutcome] = []
    if selection.all:
        wanted = sorted({item.stream for item in advertisement.refs})
    else:
        wanted = list(selection.memories)
    for stream in wanted:
        owners = advertisement.owners(stream)
        if len(owners) > 1:
            early.append(StreamOutcome(
                stream=stream, actor="", status="structurally-invalid",
                diagnostic="ambiguous owners: the stream is advertised by "
                           + ", ".join(o.actor for o in owners),
            ))  # fmt: skip
            continue
        if not owners:
            early.append(StreamOutcome(stream=stream, actor="", status="dependency-missing",
                                       diagnostic="not advertised by the remote"))  # fmt: skip
            continue
        item = owners[0]
        accepted_ref = store.remote_ref_name(remote, item.actor, item.stream)
        work.append(_Work(item=item, accepted_ref=accepted_ref,
                          previous_head=accepted.get(accepted_ref)))  # fmt: skip
    return work, early


def _selector_notes(selection: Selection) -> list[SelectorNote]:
    why = (
        "selects hn/0 collaboration refs, which Palimpsest does not replicate; it imports no memory"
    )
    notes = [SelectorNote("actor", a, "not-replicated", why) for a in selection.actors or ()]
    notes += [SelectorNote("proposal", p, "not-replicated", why)
              for p in selection.proposals or ()]  # fmt: skip
    return notes


def sync(
    where: str | Path,
    remote: str = "origin",
    *,
    recover_shallow: bool = False,
    publish: bool = True,
    progress: Progress | None = None,
) -> SyncReport:
    """Fetch, check and promote the selected streams of ``remote``; then publish local refs.

    Raises:
        InvalidInput: bad remote name, unknown remote, malformed selection, or
            ``--recover-shallow`` without a shallow repository and an explicit selection.
        Conflict: another sync is running, or accepted refs changed underneath this one.
        Unavailable: the remote could not be listed or Git failed.
    """
    validate_remote(remote)
    main_repo = store.open_repository(where)
    git_dir = store.git_dir(main_repo)
    with sync_lock(git_dir):
        recovered = recover_leftovers(git_dir)
        checkpoint("locked")
        selection = load_selection(git_dir, remote)
        saved = saved_selection_bytes(git_dir, remote)
        if recover_shallow:
            _check_shallow_request(git_dir, selection)
        url = rgit.remote_url(git_dir, remote)
        advertisement = rgit.advertise(url)
        checkpoint("advertised")
        accepted = rgit.list_refs(git_dir, _accepted_prefix(remote))
        work, early = _select_streams(selection, advertisement, remote, accepted)
        quarantine = rgit.create_quarantine(git_dir)
        checkpoint("quarantined")
        shallow_notes: list[str] = []
        try:
            _fetch_and_measure(quarantine, url, work, selection, progress,
                               full_history=recover_shallow)  # fmt: skip
            quarantine_repo = pygit2.Repository(str(quarantine.path))
            _validate(quarantine_repo, main_repo, work, progress,
                      max_events=selection.budgets.max_events)  # fmt: skip
            if recover_shallow:
                shallow_notes = _recover_shallow(git_dir, url, work)
                if shallow_notes:
                    for w in work:
                        if w.status == "dependency-missing" and w.memories:
                            w.status, w.diagnostic, w.dependency = "promotable", "", None
                            w.missing_commits.clear()
                    # fresh handles: the main store just received the recovered commits
                    main_repo = pygit2.Repository(str(git_dir))
                    quarantine_repo = pygit2.Repository(str(quarantine.path))
                    _check_relationships(quarantine_repo, main_repo,
                                         _load_base(main_repo, {w.accepted_ref for w in work}),
                                         [w for w in work if w.memories])  # fmt: skip
                if saved_selection_bytes(git_dir, remote) != saved:
                    raise Conflict(
                        "the saved selection changed during recovery",
                        code="selection-changed",
                        hint="run the command again",
                    )
            checkpoint("validated")
            _promote(git_dir, quarantine, work, remote, progress)
        finally:
            rgit.discard_quarantine(quarantine)
        published = _publish(main_repo, git_dir, remote, progress) if publish else []
        checkpoint("published")
    outcomes = sorted([*early, *(w.outcome() for w in work)], key=lambda o: (o.stream, o.actor))
    return SyncReport(
        remote=remote,
        url=redact_url(url),
        implicit_selection=selection.implicit,
        transaction=quarantine.txn,
        recovered=tuple(recovered),
        memories=tuple(outcomes),
        selectors=tuple(_selector_notes(selection)),
        malformed_refs=advertisement.malformed,
        published=tuple(published),
        shallow_recovered=tuple(shallow_notes),
    )


def _fetch_and_measure(
    quarantine: rgit.Quarantine,
    url: str,
    work: list[_Work],
    selection: Selection,
    progress: Progress | None,
    *,
    full_history: bool,
) -> None:
    budgets = selection.budgets
    wanted: list[_Work] = []
    for w in work:
        if w.previous_head == w.item.oid:
            w.status, w.unchanged = "promoted", True  # already accepted: nothing to fetch
        else:
            wanted.append(w)
    # One fetch for every stream; if it fails (one bad pack fails all), fetch one by one so the
    # failure stays with the stream that caused it.
    batch_ok = bool(wanted) and rgit.fetch_into_quarantine(
        quarantine, url, [w.item for w in wanted], full_history=full_history) is None  # fmt: skip
    for index, w in enumerate(wanted, start=1):
        if progress:
            progress("Fetching streams", index, len(wanted))
        problem = None if batch_ok else rgit.fetch_into_quarantine(
            quarantine, url, [w.item], full_history=full_history)  # fmt: skip
        if problem is None and rgit.resolve_ref(quarantine.path, quarantine.ref(
                w.item.actor, w.item.stream_hex)) != w.item.oid:  # fmt: skip
            problem = "the remote ref moved during the sync; run pal sync again"
        if problem:
            w.fail("structurally-invalid", problem)
            continue
        w.status = "fetched"
    checkpoint("fetched")
    for index, w in enumerate(work, start=1):
        if progress:
            progress("Measuring streams", index, len(work))
        if w.status != "fetched":
            continue
        m = rgit.measure(quarantine.path, w.item.oid, w.previous_head,
                         max_events=budgets.max_events)  # fmt: skip
        w.measurement = m
        over = over_budget(m, budgets)
        if over:
            w.fail("over-budget", "exceeds the selection budget for " + ", ".join(over))
    checkpoint("measured")


def _promote(
    git_dir: Path,
    quarantine: rgit.Quarantine,
    work: list[_Work],
    remote: str,
    progress: Progress | None,
) -> None:
    """Copy the objects of promotable streams and move their refs in one transaction."""
    ready = [w for w in work if w.status == "promotable"]

    def step(done: int) -> None:
        if progress and ready:
            progress("Promoting streams", done, 2)

    updates = [rgit.RefUpdate(ref=w.accepted_ref, new=w.item.oid, old=w.previous_head)
               for w in ready]  # fmt: skip
    directory = transactions_dir(git_dir)
    ensure_private_dir(directory)
    record = directory / f"{quarantine.txn}.json"
    if updates:
        write_private(record, transaction_doc(quarantine.txn, remote, "pending", updates))
    checkpoint("recorded")
    step(0)
    rgit.copy_objects(git_dir, quarantine, [quarantine.ref(w.item.actor, w.item.stream_hex)
                                            for w in ready])  # fmt: skip
    checkpoint("copied")
    step(1)
    zero = "0" * len(ready[0].item.oid) if ready else ""
    rgit.update_refs_atomically(
        git_dir,
        updates,
        zero_oid=zero,
        message=f"pal: replication promote from {remote}",
        before_commit=lambda: checkpoint("prepared"),
    )
    if updates:
        write_private(record, transaction_doc(quarantine.txn, remote, "committed", updates))
    for w in ready:
        w.status = "promoted"
    step(2)
    checkpoint("committed")


def _publish(
    repo: pygit2.Repository, git_dir: Path, remote: str, progress: Progress | None
) -> list[PublishOutcome]:
    """Push every verified local memory ref with an explicit, non-forced refspec (§20.4)."""
    try:
        refs = [ref for ref in store.list_memory_refs(repo) if ref.remote is None]
    except InvalidInput as exc:
        return [PublishOutcome(ref="refs/hn/memory/", status="invalid-local",
                               diagnostic=exc.message)]  # fmt: skip
    if not refs:
        return []
    url = rgit.remote_url(git_dir, remote, push=True)
    out: list[PublishOutcome] = []
    for done, ref in enumerate(refs, start=1):
        try:
            store.load_stream(repo, ref)
        except InvalidInput as exc:
            out.append(PublishOutcome(ref.name, "invalid-local", exc.message))
            continue
        status, why = rgit.push_ref(git_dir, url, ref.name)
        out.append(PublishOutcome(ref.name, status, why))
        if progress:
            progress("Publishing streams", done, len(refs))
    return out


def _check_shallow_request(git_dir: Path, selection: Selection) -> None:
    if not rgit.is_shallow(git_dir):
        raise InvalidInput(
            "--recover-shallow needs a shallow repository",
            code="not-shallow",
            hint="run pal sync without --recover-shallow",
        )
    if selection.implicit or selection.all or not selection.memories:
        raise InvalidInput(
            "--recover-shallow needs a saved selection of exact memory streams",
            code="recover-needs-selection",
            hint="save one with: pal replication select REMOTE --memory STREAM",
        )


def _recover_shallow(git_dir: Path, url: str, work: list[_Work]) -> list[str]:
    """Fetch exactly the commits the selected streams are missing (anchors, git evidence) with
    depth 1; nothing else is deepened and the repository stays shallow.  Returns the IDs
    recovered."""
    wanted = sorted(
        {oid for w in work if w.status == "dependency-missing" for oid in w.missing_commits}
    )
    return [oid for oid in wanted if rgit.fetch_exact_shallow(git_dir, url, oid) is None]


@dataclass(frozen=True, slots=True)
class SelectionView:
    """A selection as shown by ``pal replication show``: the document and where it lives."""

    selection: Selection
    path: str
    saved: bool
    accepted: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Wire form."""
        return {
            "saved": self.saved,
            "path": self.path,
            "selection": self.selection.to_json(),
            "accepted": [{"ref": r, "head": h} for r, h in sorted(self.accepted.items())],
        }


def show_selection(where: str | Path, remote: str) -> SelectionView:
    """The saved selection for ``remote`` (or the implicit default) and its accepted refs."""
    validate_remote(remote)
    repo = store.open_repository(where)
    git_dir = store.git_dir(repo)
    selection = load_selection(git_dir, remote)
    path = selections_dir(git_dir) / selection_file_name(remote)
    accepted = rgit.list_refs(git_dir, _accepted_prefix(remote))
    return SelectionView(selection, str(path), not selection.implicit, accepted)


def save(where: str | Path, selection: Selection) -> Path:
    """Persist ``selection`` for its remote; return the file path."""
    repo = store.open_repository(where)
    return save_selection(store.git_dir(repo), selection)


__all__ = [
    "FAILED",
    "KILL_ENV",
    "PHASES",
    "Dependency",
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
