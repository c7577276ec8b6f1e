"""Shared machinery of the service operations: clock, ids, the caller's view of the tree,
idempotent writes, committing changesets with their projection, and rendering records.

:class:`Core` is the state the operation modules (:mod:`palimpsest.service.ops`, ``admin``)
share; :class:`palimpsest.service.memories.MemoryService` is the public face over it.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from palimpsest import canonical
from palimpsest.errors import NotFound
from palimpsest.search.fts import document_text
from palimpsest.service import history, mounts, projection, wire
from palimpsest.service.access import Tree, View
from palimpsest.service.model import (
    SHARED_MAIN,
    Caller,
    Changeset,
    Member,
    Memory,
    Op,
    Principal,
    RecordBody,
    RecordVersion,
    Ref,
    Wire,
    forbidden,
    invalid,
    not_found,
    unavailable,
)
from palimpsest.service.providers import REPOSITORY_PROVIDER
from palimpsest.service.storage.protocol import Store
from palimpsest.service.storage.rows import RecordHead, StoredVersion

Clock = Callable[[], int]


def mint(prefix: str) -> str:
    """A fresh opaque id: ``<prefix>_`` + 26 lower-case base32 characters (128 random bits)."""
    raw = base64.b32encode(secrets.token_bytes(16)).decode("ascii").rstrip("=").lower()
    return f"{prefix}_{raw}"


def _thread(body: RecordBody | None) -> str | None:
    """The conversation a record belongs to (``attributes.session_id``), for ranking."""
    value = body.attributes.get("session_id") if body is not None else None
    return value[:200] if isinstance(value, str) else None


class _Stored:
    """The entries of the one projection as the record projection of one memory holds them
    (:class:`palimpsest.service.projection.State`). A record a Memory Git op made shows its
    fields through its body; one a UHP write made is, to Memory Git, an id and a status. The
    heads it read are kept for the writes that follow (:meth:`head`)."""

    def __init__(self, core: Core, memory_id: str, *, mine: bool) -> None:
        self._core = core
        self._memory = memory_id
        self._mine = mine  # a Memory Git op: it reads the fields of the records it touches
        self._heads: dict[str, RecordHead | None] = {}

    @property
    def project(self) -> str:
        return self._memory

    def head(self, record_id: str) -> RecordHead | None:
        """The record's stored head (anywhere), read once per op."""
        if record_id not in self._heads:
            self._heads[record_id] = self._core.store.record_head(record_id)
        return self._heads[record_id]

    def entry(self, record_id: str) -> projection.Entry | None:
        row = self.head(record_id)
        if row is None or row.memory_id != self._memory:
            return None
        body = self._core.body(row.body_digest) if self._mine else None
        merged = body is not None and "memory_git_id" in body.attributes
        return projection.Entry(
            row.id, projection.fields_of(body) if body is not None and merged else {},
            row.status, "", "", "", 0,
            payload={} if merged else dict(projection.EXTERNAL), home=row.memory_id,
            version=row.version, body_digest=row.body_digest)

    def body(self, entry: projection.Entry) -> RecordBody | None:
        return self._core.body(entry.body_digest) if entry.body_digest else None

    def member(self, member_id: str) -> Member | None:
        return self._core.store.member(member_id)


class _Discard(Exception):
    """Roll back a rebuild that must not write."""


def _rows_digest(rows: dict[str, str]) -> str:
    h = hashlib.sha256()
    for key in sorted(rows):
        h.update(f"{key}\x00{rows[key]}\x00".encode())
    return h.hexdigest()


def _differences(before: dict[str, str], after: dict[str, str], cap: int = 50) -> list[str]:
    """What a rebuild found different, one line per projection row (stored vs history)."""
    out: list[str] = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) == after.get(key):
            continue
        if key not in after:
            out.append(f"{key}: stored, but the history does not make it")
        elif key not in before:
            out.append(f"{key}: made by the history, missing from the store")
        else:
            out.append(f"{key}: stored {before[key]} / history {after[key]}")
        if len(out) == cap:
            out.append("… more differences not listed")
            break
    return out


class Core:
    """Store, clock and caches shared by every operation."""

    def __init__(self, store: Store, clock: Clock | None) -> None:
        self.store = store
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._last_us = 0
        self._real = clock is None
        self._sealed: dict[str, RecordBody] = {}
        self._tree: tuple[int, Tree] | None = None
        self._views: dict[frozenset[str], View] = {}
        self._views_of: Tree | None = None
        # secret SHA-256 -> (principals generation, caller): see admin.cached_caller
        self.auth_cache: dict[str, tuple[int, Caller]] = {}

    # --- time -----------------------------------------------------------------------------
    def now_ms(self) -> int:
        """Epoch milliseconds from the clock."""
        return int(self._clock())

    def now_iso(self) -> str:
        """A strictly increasing server timestamp (microseconds), so versions order by time."""
        us = time.time_ns() // 1000 if self._real else self.now_ms() * 1000
        us = max(us, self._last_us + 1)
        self._last_us = us
        moment = datetime.fromtimestamp(us // 1_000_000, UTC).replace(microsecond=us % 1_000_000)
        return wire.iso(moment)

    # --- tree and access ------------------------------------------------------------------
    def tree(self) -> Tree:
        """The tree and grants, cached until the next structural write."""
        gen = self.store.tree_generation()
        if self._tree is None or self._tree[0] != gen:
            self._tree = (gen, Tree.build(self.store.all_memories(), self.store.all_grants()))
        return self._tree[1]

    def caller_for(self, member_id: str) -> Caller:
        """The caller a member id stands for, with its groups resolved."""
        member = self.store.member(member_id)
        if member is None:
            raise NotFound("no such member", code="member_not_found")
        return Caller(member, self.store.groups_of(member_id))

    def view(self, caller: Caller) -> View:
        """The caller's effective privileges over the current tree (a view memoises per node,
        so it is kept until the tree or grants change)."""
        tree = self.tree()
        if self._views_of is not tree:
            self._views = {}
            self._views_of = tree
        found = self._views.get(caller.principals)
        if found is None:
            if len(self._views) > 1024:
                self._views.clear()
            found = self._views[caller.principals] = View(tree, caller.principals)
        return found

    def resolve(self, caller: Caller, memory_id: Any, privilege: str | None) -> tuple[View,
                                                                                         Memory]:
        """The memory if the caller sees it and holds ``privilege`` (``None``: any).

        Raises memory_not_found for unknown and unseen alike, memory_forbidden otherwise.
        """
        view = self.view(caller)
        if not isinstance(memory_id, str) or memory_id not in view.tree.nodes \
                or not view.sees(memory_id):
            raise not_found()
        if privilege is not None and not view.can(memory_id, privilege):
            raise forbidden(privilege)
        m = view.tree.nodes[memory_id]
        if privilege == "write" and m.provider == REPOSITORY_PROVIDER:
            raise mounts.read_only()  # only to a caller who holds write: unknown ≡ forbidden
        return view, m

    def record_counts(self, ids: Sequence[str]) -> dict[str, int]:
        """Active records per memory: the store's, and for a mounted repository what it serves
        by default (asked on each read, as its records are)."""
        counts = self.store.record_counts(ids)
        for mid, path in mounts.mounted(self.store, list(ids)).items():
            counts[mid] = mounts.count(path)
        return counts

    def memory_wire(self, view: View, m: Memory) -> Wire:
        """The memory object for this caller."""
        counts = self.record_counts([m.id])
        out = m.to_wire(ancestors=view.visible_ancestors(m.id),
                        privileges=view.privileges(m.id), records=counts[m.id],
                        children=len(view.visible_children(m.id)))
        # A parent the caller cannot see is not named: its id would reveal that it exists.
        out["parent_id"] = view.visible_parent(m.id)
        return out

    # --- idempotent writes ----------------------------------------------------------------
    def idempotent(self, caller: Caller, scope: str, operation: str, request: Any,  # noqa: PLR0917
                   key: str | None, apply: Callable[[str], Wire],
                   check: Callable[[], None] | None = None, *,
                   check_replays: bool = True,
                   keep: tuple[Callable[[Wire], Wire], Callable[[Wire], Wire]] | None = None
                   ) -> Wire:
        """Run ``apply(key)`` once per (caller, scope, key) inside one write transaction.

        ``check`` (access) runs first, so a replay never bypasses authorisation. A replay with
        the same request returns the stored response; another request under the key fails.
        ``check_replays=False`` (deleting a memory) lets the same caller's replay find its
        first answer although the memory is gone; keys are per caller, so nobody else can.
        ``keep = (stored, answered)``: what to keep instead of the response (a reference to
        what history already holds: no second copy of a record) and how to make the same
        answer from it again.
        """
        given = wire.idempotency_key(key)
        # Without a client key nothing can ever replay, so nothing is looked up or kept.
        key = given or f"auto-{uuid.uuid4()}"
        digest = history.request_digest(operation, scope, request) if given else ""
        principal = f"member:{caller.member.id}"
        with self.store.write():
            if given:
                # The same key sent to two processes at once: the second waits here for the
                # first to commit, then finds its answer (a replay), rather than both writing
                # and the loser failing on the unique key (the memory's writers' lock, which
                # the write takes anyway; on SQLite the file's write lock already is it).
                self.store.lock_memory(scope)
            prior = self.store.replay(principal, scope, key) if given else None
            if check is not None and (check_replays or prior is None):
                check()
            if prior is not None:
                history.check_replay(prior[0], digest)
                stored: Wire = prior[1]
                return keep[1](stored) if keep is not None else stored
            try:
                response = apply(key)
            finally:
                self._sealed.clear()
            if given:
                self.store.remember_response(principal, scope, key, digest,
                                             keep[0](response) if keep else response,
                                             self.now_ms())
            return response

    # --- changesets -----------------------------------------------------------------------
    def commit(self, memory_id: str, author: Principal, key: str, ops: Sequence[Op],  # noqa: PLR0917
               message: str, ref_name: str = SHARED_MAIN,
               expected_head: str | bool | None = False) -> Changeset:
        """Append one changeset to ``ref_name`` with CAS and apply its projection.

        Must run inside :meth:`Store.write`. ``expected_head=False`` means "the head read in
        this transaction" (a direct write); otherwise it is compared with the current head.
        The memory's writers are serialised for the transaction and the ref moves by
        compare-and-swap in the store, so a concurrent writer (another process on a server
        database) can never fork the ref. Only ``refs/shared/main`` projects into records and
        the search index.
        """
        if not ops:
            raise invalid("a changeset needs at least one op")
        now = self.now_iso()
        self.store.lock_memory(memory_id)
        ref = self.store.ref(memory_id, ref_name)
        current = ref.head if ref else None
        if expected_head is not False:
            history.check_head(expected_head if isinstance(expected_head, str) else None,
                               current, ref_name)
        cs = history.make_changeset(memory_id, ref_name, (current,) if current else (),
                                    author.grant_form, message, key, ops, now)
        self.store.insert_changeset(cs)
        self.store.advance_ref(Ref(memory_id, ref_name, cs.id, ref_name.startswith("refs/shared/"),
                                   author.grant_form, ref.created_at if ref else now, now),
                               expected=current)
        if ref_name == SHARED_MAIN:
            for op in cs.ops:
                self.apply(cs, op)
        return cs

    def state(self, memory_id: str) -> projection.State:
        """The entries of ``memory_id``'s record projection as the one projection reads them
        (for a view that overlays changes on the store's, such as the prime preview)."""
        return _Stored(self, memory_id, mine=True)

    def apply(self, cs: Changeset, op: Op) -> None:
        """Project one op of an accepted changeset (records, versions, edges, index) through
        the one projection (:func:`palimpsest.service.projection.apply`)."""
        state = _Stored(self, cs.memory_id, mine=op.op_type not in projection.UHP_OPS)
        for change in projection.apply(state, cs, op, 0, strict=False):
            self._project(cs, change, state.head(change.entry.memory_id))

    def _project(self, cs: Changeset, change: projection.Change, row: RecordHead | None
                 ) -> None:
        """Write what one op did to one record (whose stored head is ``row``) into the store."""
        rid = change.entry.memory_id
        if change.erased:
            for fid in self._file_ids(rid):
                self.store.delete_file(fid)
            self.store.project_erase(rid)
            self.store.forget_responses(rid)
            return
        if change.version is not None:
            self._new_version(cs, rid, change.version, row)
        elif change.retired_at is not None:
            self.store.project_forget(rid, change.retired_at)

    def _new_version(self, cs: Changeset, rid: str, v: projection.Version,
                     row: RecordHead | None) -> None:
        if row is not None and row.memory_id != cs.memory_id:
            raise invalid("the record already exists in another memory")
        body = v.body
        if body is not None:
            self.seal(body, v.bases)
        else:
            body = self._sealed.pop(v.body_digest, None)
            if body is None:
                stored = self.store.body(v.body_digest)
                if stored is not None and history.body_matches(v.body_digest, stored):
                    body = RecordBody.from_bytes(stored)
                # else: erased later in history, or damaged: indexed as nothing
        w = v.writer
        extra = {k: w[k] for k in ("on_behalf_of", "consolidation_id") if k in w}
        written_at = str(w["written_at"])
        self.store.project_version(
            record_id=rid, memory_id=cs.memory_id, version=row.version + 1 if row else 1,
            type=body.type if body else "x.erased", body_digest=v.body_digest,
            written_at=written_at, written_by=canonical.encode(w["written_by"]).decode(),
            extra=canonical.encode(extra).decode(), changeset_id=cs.id,
            standing=bool(body and body.attributes.get("standing") is True),
            fts_text=document_text(body.text) if body else "",
            edges=[(r.record_id, r.rel) for r in body.references] if body else (),
            existing=row.n if row is not None else None,
            was_forgotten=row is not None and row.status == "forgotten",
            thread=_thread(body), when=(body.valid_from if body else None) or written_at)

    def rebuild(self, *, repair: bool = False) -> Wire:
        """Re-derive every projection from the changesets reachable from each memory's
        ``refs/shared/main``, verifying every digest, and compare with what is stored.

        Nothing is written unless ``repair`` is set: an equal store needs nothing, and an
        unequal one is reported (``differences`` names the rows) for an operator to look at
        before ``repair`` replaces the stored projections with what the history says."""
        report: Wire = {}
        try:
            with self.store.write():
                every = list(self.store.changesets())  # append order: parents first
                parents = {cs.id: cs.parent_ids for cs in every}
                reachable: set[str] = set()
                for mid in dict.fromkeys(cs.memory_id for cs in every):
                    ref = self.store.ref(mid, SHARED_MAIN)
                    stack = [ref.head] if ref and ref.head else []
                    while stack:
                        cid = stack.pop()
                        if cid in reachable or cid not in parents:
                            continue
                        reachable.add(cid)
                        stack.extend(parents[cid])
                before = self.store.projection_rows()
                self.store.clear_projections()
                verified = 0
                for cs in every:
                    history.verify(cs)
                    verified += 1
                    if cs.id in reachable:
                        for op in cs.ops:
                            self.apply(cs, op)
                after = self.store.projection_rows()
                report = {"object": "memory.rebuild", "verified": verified,
                          **self.store.counts(), "equal": after == before,
                          "digest_before": _rows_digest(before),
                          "digest_after": _rows_digest(after),
                          "differences": _differences(before, after),
                          "written": repair and after != before}
                if not report["written"]:
                    raise _Discard
        except _Discard:
            pass  # rolled back: the stored projections stay exactly as they were
        finally:
            self._sealed.clear()
        return report

    def _file_ids(self, record_id: str) -> set[str]:
        out: set[str] = set()
        for row in self.store.versions(record_id):
            if row.data is None:
                continue
            for p in RecordBody.from_bytes(row.data).content:
                if p.file is not None:
                    out.add(p.file.id)
        return out

    def seal(self, body: RecordBody, bases: Sequence[str] = ()) -> str:
        """Store a record body apart from history; returns the digest its op names. ``bases``
        name the stored values it was derived from (a merged record's payload)."""
        digest, data = history.seal_body(body)
        self.store.put_body(digest, data, bases)
        self._sealed[digest] = body  # the projection in this transaction needs no re-read
        return digest

    # --- what the projection holds ------------------------------------------------------------
    def body(self, digest: str) -> RecordBody | None:
        """A stored body that still matches its digest (``None``: erased or damaged)."""
        sealed = self._sealed.get(digest)
        if sealed is not None:
            return sealed
        data = self.store.body(digest)
        if data is None or not history.body_matches(digest, data):
            return None
        return RecordBody.from_bytes(data)

    # --- rendering ------------------------------------------------------------------------
    def version(self, row: StoredVersion, as_of: str | None = None) -> RecordVersion:
        """A stored version (with its body) as a :class:`RecordVersion`."""
        if row.data is None or not history.body_matches(row.body_digest, row.data):
            raise unavailable("a record body is missing or fails its digest; run "
                              "pal admin rebuild or restore from a backup")
        body = RecordBody.from_bytes(row.data)
        if as_of is not None:
            status = "forgotten" if row.forgotten_at and row.forgotten_at <= as_of \
                else "active"
        elif row.invalidated_at:
            status = "superseded"
        elif row.forgotten_at:
            status = "forgotten"
        else:
            status = "active"
        wb = row.written_by
        extra = row.extra
        v = row.version
        return RecordVersion(
            id=row.record_id, memory_id=row.memory_id, version=v, status=status,
            supersedes=v - 1 if v > 1 else None, body=body, written_at=row.written_at,
            invalidated_at=row.invalidated_at or row.forgotten_at,
            written_by=history.principal_of(wb), changeset_id=row.changeset_id,
            on_behalf_of=history.principal_of(extra["on_behalf_of"])
            if "on_behalf_of" in extra else None,
            consolidation_id=extra.get("consolidation_id"))

    def render(self, view: View, rec: RecordVersion) -> Wire:
        """The record as this caller may see it: references into memories it cannot read
        become ``{record_id, available:false}``."""
        refs: list[Wire] = []
        where = self.store.memory_of_records([r.record_id for r in rec.body.references
                                              if r.memory_id is None])
        for r in rec.body.references:
            mid = r.memory_id or where.get(r.record_id)
            if mid is not None and mid in view.tree.nodes and view.can(mid, "read"):
                refs.append({"rel": r.rel, "memory_id": mid, "record_id": r.record_id})
            else:
                refs.append({"record_id": r.record_id, "available": False})
        return rec.to_wire(refs)


__all__ = ["Clock", "Core", "mint"]
