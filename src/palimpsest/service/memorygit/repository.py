"""Memory Git service: refs with server-enforced ownership, changesets, reads (§3–§8).

A *project* is one memory of the service (its id). The caller is always a principal string
``member:<id>`` stamped from the credential; clients never name the author.

Ref namespaces and who may write them — enforced here, not by clients (memory-git.md §14.3):

- ``refs/shared/*``: protected accepted memory; never written by a commit or a plain advance,
  only by a merge carrying a verified ``memory-git-merge/v2`` authorization (:mod:`gitflow`).
- ``refs/agents/<member>/*`` and ``refs/sessions/<member>/*``: only ``<member>`` may create
  them, and only their creator may move them.
- ``refs/topics/*`` and ``refs/repos/*``: anyone with ``write`` may create one; only its creator
  may move it.

Proposals, reviews and merges live in :mod:`palimpsest.service.memorygit.flow`.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from palimpsest.errors import Conflict, Forbidden, InvalidInput, NotFound
from palimpsest.service import history
from palimpsest.service.memorygit import projection as gitproject
from palimpsest.service.memorygit.ops import ChangesetRequest, assign_ids, parse_request
from palimpsest.service.memorygit.projection import Projection
from palimpsest.service.model import Changeset, Op
from palimpsest.service.storage.protocol import ReviewStore

SHARED_MAIN = "refs/shared/main"
_CACHED_CHANGESETS = 50_000  # verified, immutable changesets kept in memory
_CACHED_HEADS = 32  # projections of recent heads
_COMPONENT = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}"
_REF = re.compile(rf"refs/(shared|agents|sessions|topics|repos)(/{_COMPONENT})+")
Clock = Callable[[], int]  # epoch nanoseconds
Projector = Callable[[Changeset], None]  # applies an accepted changeset to records + index


class Access(Protocol):
    """The service's grant check, as Memory Git needs it."""

    def require(self, principal: str, project: str, privilege: str) -> None:
        """Raise NotFound (unknown or unseen project) or Forbidden (missing privilege)."""


def hidden(kind: str) -> NotFound:
    """The one answer for an unknown id and for an object of a memory the caller may not see
    (same code, same message: the two can never be told apart)."""
    return NotFound(f"no such {kind} within your reach", code=f"{kind}-not-found")


def new_id(now_ns: int) -> str:
    """A UUIDv7 string: 48-bit millisecond time, version 7, variant 10, random rest."""
    ms = now_ns // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62 | rand & ((1 << 62) - 1)
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def iso(now_ns: int) -> str:
    """RFC 3339 UTC with microseconds."""
    return datetime.fromtimestamp(now_ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def member_of(principal: str) -> str:
    """The member id inside ``member:<id>``."""
    kind, _, ident = principal.partition(":")
    return ident if kind == "member" else ""


def check_ref_name(name: str) -> str:
    """Validate a ref name (closed namespaces, safe components, no ``..``).

    Raises:
        InvalidInput: a name outside the namespaces of memory-git.md §5.
    """
    if len(name) > 512 or not _REF.fullmatch(name) or ".." in name:
        raise InvalidInput(f"ref name {name[:80]!r} is not a valid Memory Git ref",
                           code="invalid-ref",
                           hint="use refs/agents/<you>/<name>, refs/sessions/<you>/<id>, "
                                "refs/topics/<topic> or refs/shared/<name>")
    return name


def is_protected(name: str) -> bool:
    """``refs/shared/*`` is always protected."""
    return name.startswith("refs/shared/")


def may_create(principal: str, name: str) -> bool:
    """Whether ``principal`` may create the ref ``name`` (shared refs excluded)."""
    parts = name.split("/")
    if parts[1] in ("agents", "sessions"):
        return len(parts) >= 4 and parts[2] == member_of(principal) != ""
    return parts[1] in ("topics", "repos")


class GitService:
    """Memory Git over a :class:`ReviewStore`, an access check and a clock."""

    def __init__(self, store: ReviewStore, access: Access, clock: Clock | None = None,
                 projector: Projector | None = None) -> None:
        """Wire the service; ``clock`` returns epoch nanoseconds (tests pass a fake one).

        ``projector`` applies a changeset that became accepted (reachable from
        ``refs/shared/main``) to the records and the search index, inside the same transaction.
        """
        self.store = store
        self.access = access
        self.clock: Clock = clock or time.time_ns
        self.projector = projector
        self._lock = threading.Lock()
        self._verified: OrderedDict[str, Changeset] = OrderedDict()
        self._heads: OrderedDict[tuple[str, str], Projection] = OrderedDict()
        self._erase_gen = -1  # caches hold payloads: an erase anywhere empties them

    # --- helpers --------------------------------------------------------------------------
    def require_visible(self, principal: str, project: str, privilege: str, kind: str) -> None:
        """Access to an object reached by its own id: a memory the caller cannot see answers
        exactly as an unknown id does (:func:`hidden`)."""
        try:
            self.access.require(principal, project, privilege)
        except NotFound:
            raise hidden(kind) from None

    def now(self) -> str:
        """The current time as RFC 3339."""
        return iso(self.clock())

    def _fresh(self) -> None:
        """Drop cached changesets and projections when an erase happened since they were read
        (by this process or another): an erased payload is never served from memory."""
        gen = self.store.erase_generation()
        if gen != self._erase_gen:
            with self._lock:
                self._verified.clear()
                self._heads.clear()
                self._erase_gen = gen

    def load(self, changeset_id: str) -> Changeset:
        """A verified changeset (integrity digest recomputed when read from storage).

        Changesets are immutable and named by their digest, so a verified one is kept in a
        bounded in-memory cache; every read from storage is verified.

        Raises:
            NotFound: no such changeset. Unavailable: the stored document fails its digest.
        """
        self._fresh()
        return self._load(changeset_id)

    def _walker(self) -> Callable[[str], Changeset]:
        """The loader of a walk over history: freshness checked once for the whole walk."""
        self._fresh()
        return self._load

    def _load(self, changeset_id: str) -> Changeset:
        if not isinstance(changeset_id, str) or not 0 < len(changeset_id) <= 128:
            raise hidden("changeset")
        with self._lock:
            hit = self._verified.get(changeset_id)
            if hit is not None:
                self._verified.move_to_end(changeset_id)
                return hit
        found = self.store.changeset(changeset_id)
        if found is None:
            raise hidden("changeset")
        cs = history.verify(found)
        with self._lock:
            self._verified[changeset_id] = cs
            while len(self._verified) > _CACHED_CHANGESETS:
                self._verified.popitem(last=False)
        return cs

    def _remember(self, project: str, head: str, state: Projection) -> None:
        with self._lock:
            self._heads[(project, head)] = state
            while len(self._heads) > _CACHED_HEADS:
                self._heads.popitem(last=False)

    def _cached(self, project: str, head: str) -> Projection | None:
        with self._lock:
            state = self._heads.get((project, head))
            if state is not None:
                self._heads.move_to_end((project, head))
            return state

    def accept(self, project: str, old_head: str | None, new_head: str) -> None:
        """Project what ``refs/shared/main`` gained (call inside the advancing transaction)."""
        if self.projector is None or not new_head:
            return
        for cs in self.only_in(new_head, old_head):
            self.projector(cs)

    def ref_or_404(self, project: str, name: str) -> dict[str, Any]:
        """The ref, or NotFound."""
        ref = self.store.ref(project, name)
        if ref is None:
            raise NotFound(f"ref {name} does not exist in this project", code="ref-not-found")
        return ref

    def in_project(self, project: str, changeset_id: str) -> Changeset:
        """A changeset that must belong to ``project`` (cross-project ids look absent)."""
        cs = self.load(changeset_id)
        if cs.memory_id != project:
            raise hidden("changeset")
        return cs

    def ancestors(self, head: str | None) -> set[str]:
        """Every changeset id reachable from ``head`` (itself included)."""
        return {cs.id for cs in gitproject.walk(head, self._walker())}

    def project(self, project: str, head: str | None) -> Projection:
        """The projection of ``head`` (a private copy the caller may change).

        The projection of a head never changes, so recent heads are cached; a head whose only
        parent is cached costs one changeset; otherwise the DAG is replayed from scratch. The
        property test checks cached, incremental and from-scratch projections agree.
        """
        if head is None:
            return Projection(project)
        self._fresh()
        state = self._cached(project, head)
        if state is None:
            cs = self.load(head)
            parent = self._cached(project, cs.parent_ids[0]) if len(cs.parent_ids) == 1 else None
            if parent is not None:
                state = parent.copy()
                gitproject.apply_changeset(state, cs)
            else:
                state = gitproject.project_head(project, head, self._walker())
            self._remember(project, head, state)
        return state.copy()

    def project_parents(self, project: str, parents: tuple[str, ...]) -> Projection:
        """The projection of the union of ``parents`` (merge commits have several)."""
        if len(parents) <= 1:
            return self.project(project, parents[0] if parents else None)
        order: list[Changeset] = []
        seen: set[str] = set()
        for parent in parents:
            for cs in gitproject.walk(parent, self._walker()):
                if cs.id not in seen:
                    seen.add(cs.id)
                    order.append(cs)
        return gitproject.replay(project, order)

    def _owned(self, principal: str, ref: dict[str, Any]) -> None:
        if ref["protected"]:
            raise Forbidden(f"{ref['ref_name']} is protected; propose a merge instead",
                            code="protected-ref")
        if ref["created_by_principal"] != principal:
            raise Forbidden(f"{ref['ref_name']} belongs to another principal",
                            code="ref-not-owned", hint="write to your own refs/agents/<you>/…")

    # --- projects and refs ----------------------------------------------------------------
    def list_projects(self, principal: str) -> list[str]:
        """Projects with Memory Git history the caller may read."""
        out = []
        for project in self.store.projects():
            try:
                self.access.require(principal, project, "read")
            except (NotFound, Forbidden):
                continue
            out.append(project)
        return out

    def init(self, principal: str, project: str) -> dict[str, Any]:
        """Create the root changeset and the protected ``refs/shared/main`` (idempotent)."""
        self.access.require(principal, project, "write")
        existing = self.store.ref(project, SHARED_MAIN)
        if existing is not None:
            head = existing["head_changeset_id"]
            return {"changeset": self.load(head).to_wire() if head else None,
                    "ref": existing}
        now_ns = self.clock()
        root = history.make_changeset(project, SHARED_MAIN, (), "system", "root", "legacy-root",
                                      (), iso(now_ns))
        with contextlib.suppress(Conflict):  # a concurrent init won; read what it made
            self.store.commit(root, request_digest=None, advance=True, expected_head=None,
                              create_ref=(True, "system"), now=iso(now_ns))
        ref = self.ref_or_404(project, SHARED_MAIN)
        return {"changeset": self.load(ref["head_changeset_id"]).to_wire(), "ref": ref}

    def list_refs(self, principal: str, project: str) -> list[dict[str, Any]]:
        """Every ref of the project."""
        self.access.require(principal, project, "read")
        return self.store.refs(project)

    def get_ref(self, principal: str, project: str, name: str) -> dict[str, Any]:
        """One ref (404 when absent)."""
        self.access.require(principal, project, "read")
        return self.ref_or_404(project, check_ref_name(name))

    def create_branch(self, principal: str, project: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create an owned ref at an existing head of the project (§5 branch)."""
        self.access.require(principal, project, "write")
        name = check_ref_name(str(body.get("ref_name", "")))
        if is_protected(name) or body.get("protected"):
            raise Forbidden("protected refs are not created by branching", code="protected-ref")
        if not may_create(principal, name):
            raise Forbidden(f"{name} is outside your namespace", code="ref-not-owned",
                            hint=f"use refs/agents/{member_of(principal) or '<you>'}/<name>")
        head = body.get("head_changeset_id")
        if head is not None:
            if not isinstance(head, str):
                raise InvalidInput("head_changeset_id must be a string")
            self.in_project(project, head)
        return self.store.create_ref(project, name, head, protected=False,
                                     created_by=principal, now=self.now())

    def advance_ref(self, principal: str, project: str, body: dict[str, Any]) -> dict[str, Any]:
        """CAS-advance an owned, unprotected ref to a descendant head."""
        self.access.require(principal, project, "write")
        name = check_ref_name(str(body.get("ref_name", "")))
        ref = self.ref_or_404(project, name)
        self._owned(principal, ref)
        expected, new = body.get("expected_head"), body.get("new_head")
        if not isinstance(new, str):
            raise InvalidInput("new_head is required")
        self.in_project(project, new)
        self.store.advance(project, name, expected if isinstance(expected, str) else None, new,
                           self.now())
        return self.ref_or_404(project, name)

    # --- changesets -----------------------------------------------------------------------
    def create_changeset(self, principal: str, body: Any) -> tuple[dict[str, Any], bool]:
        """Validate and commit a changeset; returns ``(changeset, created)``.

        ``created`` is False for an idempotent replay of the identical request.

        Raises:
            InvalidInput: shape, keys, caps or semantics (400). Forbidden: protected or foreign
            ref (403). Conflict: CAS miss or idempotency mismatch (409).
        """
        req = parse_request(body, author_principal=principal)
        check_ref_name(req.ref_name)
        self.access.require(principal, req.project_id, "write")
        digest = history.request_digest("changeset", req.project_id, req.digest_fields())
        prior = self.store.changeset_by_key(req.project_id, principal, req.idempotency_key)
        if prior is not None:
            history.check_replay(prior[1], digest)
            return self.load(prior[0]).to_wire(), False
        return self._commit(principal, req, digest).to_wire(), True

    def _commit(self, principal: str, req: ChangesetRequest, digest: str) -> Changeset:
        ref = self.store.ref(req.project_id, req.ref_name)
        protected = is_protected(req.ref_name) or req.protected
        if req.advance_ref:
            if protected:
                raise Forbidden(f"{req.ref_name} is protected; commit to your own ref and "
                                "propose a merge", code="protected-ref")
            if ref is None:
                if not req.create_ref_if_missing:
                    raise NotFound(f"ref {req.ref_name} does not exist", code="ref-not-found",
                                   hint="create it with create_ref_if_missing or a branch")
                if not may_create(principal, req.ref_name):
                    raise Forbidden(f"{req.ref_name} is outside your namespace",
                                    code="ref-not-owned")
            else:
                self._owned(principal, ref)
        elif protected and ref is None:
            raise NotFound(f"ref {req.ref_name} does not exist", code="ref-not-found")
        elif not protected and ref is not None and ref["created_by_principal"] != principal:
            raise Forbidden(f"{req.ref_name} belongs to another principal",
                            code="ref-not-owned")
        elif not protected and ref is None and not may_create(principal, req.ref_name):
            raise Forbidden(f"{req.ref_name} is outside your namespace", code="ref-not-owned")
        current = ref["head_changeset_id"] if ref else None
        parents = req.parent_ids or ((current,) if current else ())
        if req.advance_ref and current is not None and req.expected_head is None:
            raise InvalidInput("expected_head is required to advance a ref with a head",
                               code="expected-head-required")
        if req.advance_ref and req.expected_head != current:
            raise Conflict(f"{req.ref_name} moved: expected head {req.expected_head or 'none'}, "
                           f"current head {current or 'none'}", code="cas_mismatch",
                           hint="re-read the ref, reconcile, resubmit with a new idempotency key")
        if req.advance_ref and current is not None and current not in parents:
            raise InvalidInput("parent_ids must include the ref's current head",
                               code="invalid-parents")
        for parent in parents:
            self.in_project(req.project_id, parent)
        now_ns = self.clock()
        ops = assign_ids(req.project_id, principal, req.idempotency_key, req.ops)
        # Second validation (make_changeset), over the exact values about to become immutable.
        cs = history.make_changeset(req.project_id, req.ref_name, parents, principal,
                                    req.message, req.idempotency_key, ops, iso(now_ns),
                                    req.extra())
        state = self.project_parents(req.project_id, parents)
        gitproject.apply_changeset(state, cs)
        self.store.commit(cs, request_digest=digest, advance=req.advance_ref,
                          expected_head=current,
                          create_ref=(False, principal) if ref is None else None,
                          now=iso(now_ns))
        self._remember(req.project_id, cs.id, state)
        return cs

    def commit_server(self, principal: str, project: str, ref_name: str, *,
                      parents: tuple[str, ...], message: str, key: str,
                      ops: tuple[Op, ...] = ()) -> Changeset:
        """A server-made changeset that does not advance its ref (merge commit, cherry-pick).

        Raises:
            InvalidInput: the combined history does not replay (e.g. both sides add one id).
        """
        now_ns = self.clock()
        cs = history.make_changeset(project, ref_name, parents, principal, message, key,
                                    assign_ids(project, principal, key, tuple(ops)),
                                    iso(now_ns))
        gitproject.apply_changeset(self.project_parents(project, parents), cs)
        self.store.commit(cs, request_digest=None, advance=False, expected_head=None,
                          create_ref=None, now=iso(now_ns))
        return cs

    def get_changeset(self, principal: str, changeset_id: str) -> dict[str, Any]:
        """One changeset (integrity verified on read)."""
        cs = self.load(changeset_id)
        self.require_visible(principal, cs.memory_id, "read", "changeset")
        return cs.to_wire()

    def log(self, principal: str, project: str, ref: str, limit: int = 20) -> dict[str, Any]:
        """Changesets reachable from a ref head, newest first (limit ≤ 200)."""
        self.access.require(principal, project, "read")
        if not 1 <= limit <= 200:
            raise InvalidInput("limit must be between 1 and 200", code="invalid-limit")
        head = self.ref_or_404(project, check_ref_name(ref))["head_changeset_id"]
        changes = list(reversed(gitproject.walk(head, self._walker())))[:limit]
        return {"changesets": [cs.to_wire() for cs in changes], "project": project,
                "ref": ref}

    def reachable_head(self, project: str, ref: str, head: str | None) -> str | None:
        """``head`` if reachable from ``ref`` (else 404), or the ref's head when omitted."""
        ref_head = self.ref_or_404(project, check_ref_name(ref))["head_changeset_id"]
        if head is None or head == ref_head:
            return ref_head  # type: ignore[no-any-return]
        if head not in self.ancestors(ref_head):
            # the id is not echoed: a hidden changeset answers exactly as an unknown one
            raise NotFound(f"head_changeset_id is not reachable from {ref}",
                           code="head-not-reachable",
                           hint="an unmerged branch is never presented as this ref")
        return head

    def context_at(self, principal: str, project: str, body: dict[str, Any]) -> dict[str, Any]:
        """``MemoryContext`` at an exact head reachable from the named ref (§8)."""
        self.access.require(principal, project, "read")
        ref = str(body.get("ref_name") or SHARED_MAIN)
        if not is_protected(ref):
            owner = (self.ref_or_404(project, check_ref_name(ref))["created_by_principal"])
            if owner != principal:
                raise Forbidden("non-shared refs are readable only by their owner",
                                code="ref-not-owned")
        wanted = body.get("head_changeset_id")
        if wanted is not None and not isinstance(wanted, str):
            raise InvalidInput("head_changeset_id must be a string")
        head = self.reachable_head(project, ref, wanted)
        limit = body.get("limit")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise InvalidInput("limit must be an integer")
        query = body.get("query") or ""
        if not isinstance(query, str):
            raise InvalidInput("query must be a string")
        state = self.project(project, head)
        manifest_id = None
        out = gitproject.context(state, ref_name=ref, head=head, query=query, limit=limit)
        if body.get("create_manifest"):
            self.access.require(principal, project, "write")
            manifest_id = new_id(self.clock())
            manifest = {"manifest_id": manifest_id, "direction": "input", "project_id": project,
                        "ref_name": ref, "head_changeset_id": head,
                        "selected_memory_ids": [m["memory_id"] for m in out["memories"]],
                        "session_id": body.get("session_id"), "actor_id": body.get("actor_id"),
                        "created_at": self.now()}
            self.store.put_manifest(manifest)
            out = gitproject.context(state, ref_name=ref, head=head, query=query, limit=limit,
                                     manifest_id=manifest_id)
        return out

    def get_manifest(self, principal: str, manifest_id: str) -> dict[str, Any]:
        """A stored context manifest."""
        doc = self.store.manifest(manifest_id)
        if doc is None:
            raise hidden("manifest")
        self.require_visible(principal, doc["project_id"], "read", "manifest")
        return doc

    def merge_base(self, left: str | None, right: str) -> str | None:
        """The newest common ancestor (by walk order of ``right``)."""
        left_set = self.ancestors(left)
        common = [cs.id for cs in gitproject.walk(right, self._walker())
                  if cs.id in left_set]
        return common[-1] if common else None

    def only_in(self, head: str, base: str | None) -> list[Changeset]:
        """Changesets reachable from ``head`` but not from ``base``, roots first."""
        skip = self.ancestors(base)
        return [cs for cs in gitproject.walk(head, self._walker()) if cs.id not in skip]


__all__ = ["SHARED_MAIN", "Access", "GitService", "Projector", "check_ref_name", "hidden",
           "is_protected", "iso", "may_create", "member_of", "new_id"]
