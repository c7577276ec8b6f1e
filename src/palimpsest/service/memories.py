"""The memory service facade: one method per operation of the UHP Memories chapter.

``MemoryService`` is what the HTTP API, the MCP tools, the Hermes provider and ``pal admin``
call. Every method takes plain values (decoded JSON bodies as ``dict``, query parameters as
keyword arguments) and returns wire-shaped dicts (:data:`Wire`) ready to serialise, exactly the
bodies of uhp-memories.md §3–§12. Edges add nothing but transport.

Conventions:

- ``caller`` is the authenticated :class:`Caller` (from :meth:`authenticate`); the server stamps
  ``written_by`` from it, a body can never supply it.
- ``idempotency_key``: every write takes one (the ``Idempotency-Key`` header). ``None`` means
  "the client sent none" and a fresh key is used. A replay of the same request under the same
  key returns the first response unchanged; a different request under a reused key raises
  ``Conflict(code="idempotency_mismatch")`` and writes nothing.
- Errors are the :mod:`palimpsest.errors` tree with the codes of uhp-memories.md §11:
  ``NotFound(memory_not_found | memory_record_not_found)``, ``Forbidden(memory_forbidden)``,
  ``InvalidInput(memory_invalid | memory_unsupported)``, ``Conflict(memory_busy |
  idempotency_mismatch | cas_mismatch)``, ``Unavailable(memory_unavailable)``, and
  ``Forbidden(invalid_credential)`` from :meth:`authenticate` (HTTP 401). An unknown memory and
  one the caller may not see raise the same ``memory_not_found``.
- Reads of records always carry ``trust: "untrusted"`` and ``written_by``.

Methods without a ``caller`` (members, groups, credentials, rebuild) are operator actions for
``pal admin`` and first start; the API exposes none of them to agents.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from palimpsest.hn.replication.selection import Budgets
from palimpsest.service import admin as admin_mod
from palimpsest.service import audit as audit_mod
from palimpsest.service import grouped, history, mounts, projection, providers, sessions
from palimpsest.service.core import Core
from palimpsest.service.grouped import RememberCall
from palimpsest.service.memorygit import dossier
from palimpsest.service.memorygit import log as gitlog
from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.service.memorygit.reviewed import ReviewedWrites
from palimpsest.service.memorygit.wiring import open_flow
from palimpsest.service.model import (
    SHARED_MAIN,
    AuditEntry,
    Caller,
    Changeset,
    Credential,
    FileBytes,
    Group,
    Member,
    Session,
    Wire,
    unsupported,
)
from palimpsest.service.ops import (
    consolidation,
    graph,
    harness,
    observe,
    prime,
    queries,
    recall,
    records,
    snapshots,
    tree,
)
from palimpsest.service.provenance import members as provenance
from palimpsest.service.provenance import trust
from palimpsest.service.provenance.keys import ServerKeys
from palimpsest.service.provenance.receipts import Receipts, split_include
from palimpsest.service.storage import WRITE_WAIT_SECONDS, open_store
from palimpsest.service.storage.protocol import ReviewStore

Clock = Callable[[], int]  # epoch milliseconds


class MemoryService:
    """The service over one data directory (SQLite in WAL mode + content-addressed files)."""

    def __init__(self, data_dir: Path, *, clock: Clock | None = None,
                 durability: str = "normal", database: str | None = None,
                 write_wait: float = WRITE_WAIT_SECONDS) -> None:
        """Open (creating if needed) the store in ``data_dir``.

        ``clock`` returns epoch milliseconds; tests pass a fake one for ``as_of`` reads.
        ``durability="full"`` fsyncs every write (survives power loss, not only kill -9).
        ``database`` (a ``postgresql://`` URL) keeps the store on PostgreSQL; the data
        directory then keeps the server's keys and file bytes only.
        ``write_wait``: seconds a write waits for other processes' writers (several
        ``pal serve`` workers, ``pal admin``) before it is refused as busy (503, Retry-After).

        Raises:
            Unavailable: memory_unavailable when the directory or database cannot be opened.
        """
        self.data_dir = Path(data_dir)  # Memory Git keeps its own store here (api/memory_git)
        self._store = open_store(self.data_dir, durability=durability, database=database,
                                 write_wait=write_wait)
        # Every changeset the store accepts is signed by the server's identity, in the same
        # transaction (docs/provenance.md).
        self.server_keys = ServerKeys(self.data_dir)
        self._store.set_signer(
            lambda cs: self.server_keys.sign(cs, history.canonical_bytes(cs)))
        self._core = Core(self._store, clock)
        self._reviewed: ReviewedWrites | None = None  # Memory Git review gate, made on first use
        self._receipts: Receipts | None = None  # made on the first read that asks for one

    def close(self) -> None:
        """Close the database (idempotent)."""
        self._store.close()

    def __enter__(self) -> MemoryService:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # --- members, groups, credentials (operator: pal admin, first start) ----------------------
    def bootstrap_owner(self, name: str = "owner") -> tuple[Member, str] | None:
        """On first start create an admin human member and return it with its credential
        secret (shown once); ``None`` when members already exist."""
        return admin_mod.bootstrap_owner(self._core, name)

    def create_member(self, name: str, type: str = "human", *, admin: bool = False) -> Member:
        """Create a member (``type`` human | agent). Raises InvalidInput(memory_invalid)."""
        return admin_mod.create_member(self._core, name, type, admin)

    def list_members(self) -> list[Member]:
        """Every member, oldest first."""
        return self._store.members()

    def get_member(self, member_id: str) -> Member:
        """One member. Raises NotFound(code="member_not_found")."""
        return admin_mod.get_member(self._core, member_id)

    def create_group(self, name: str) -> Group:
        """Create a group. Raises InvalidInput(memory_invalid) on a blank name."""
        return admin_mod.create_group(self._core, name)

    def list_groups(self) -> list[Group]:
        """Every group with its members."""
        return self._store.groups()

    def add_membership(self, group_id: str, member_id: str) -> Group:
        """Put a member in a group (idempotent). Raises NotFound for an unknown id."""
        return admin_mod.set_membership(self._core, group_id, member_id, True)

    def remove_membership(self, group_id: str, member_id: str) -> Group:
        """Take a member out of a group (idempotent). Raises NotFound for an unknown id."""
        return admin_mod.set_membership(self._core, group_id, member_id, False)

    def issue_credential(self, member_id: str, label: str = "") -> tuple[Credential, str]:
        """Mint a bearer credential; returns it and its secret (stored only as a hash)."""
        return admin_mod.issue_credential(self._core, member_id, label)

    def list_credentials(self, member_id: str | None = None) -> list[Credential]:
        """Credentials (never secrets), optionally of one member."""
        return self._store.credentials(member_id)

    def revoke_credential(self, credential_id: str) -> Credential:
        """Revoke a credential. Raises NotFound(code="credential_not_found")."""
        return admin_mod.revoke_credential(self._core, credential_id)

    def authenticate(self, secret: str) -> Caller:
        """Resolve a bearer secret to its caller (member + groups).

        Raises:
            Forbidden: code ``invalid_credential`` (HTTP 401) for an unknown, malformed or
                revoked secret. Comparison is constant-time on the stored hash.
        """
        return admin_mod.authenticate(self._core, secret)

    def cached_caller(self, secret: str) -> Caller | None:
        """The caller of a secret :meth:`authenticate` accepted before, when no member, group,
        membership or credential changed since (checked against the store on every call, so a
        revocation by ``pal admin`` in another process counts at once); ``None`` means "call
        :meth:`authenticate`". Never waits on the store lock: an event loop may call it."""
        return admin_mod.cached_caller(self._core, secret)

    # --- the audit log (service/audit.py: writes and refusals, never content) -----------------
    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        """Append audit entries (the faces describe each write and refusal)."""
        audit_mod.append(self._core, entries)

    def audit_log(self, *, member_id: str | None = None, memory_id: str | None = None,
                  outcome: str | None = None, since: int | None = None,
                  until: int | None = None, limit: int = 100) -> list[AuditEntry]:
        """Audit entries matching every filter (epoch ms bounds), newest first (operator)."""
        return audit_mod.entries(self._core, member_id=member_id, memory_id=memory_id,
                                 outcome=outcome, since=since, until=until, limit=limit)

    def prune_audit(self, retention_days: int) -> int:
        """Delete audit entries older than ``retention_days`` (0 keeps all); how many."""
        return audit_mod.prune(self._core, retention_days)

    # --- review-desk sessions (service/sessions.py: in the store, shared by every process) -----
    def open_session(self, secret: str, *, idle_seconds: float,
                     max_seconds: float) -> tuple[str, Session, Caller]:
        """Sign a person in with a credential → ``(session id for the cookie, session,
        caller)``; only the id's hash is stored. Raises Forbidden(invalid_credential)."""
        return sessions.open_session(self._core, secret, idle_ms=int(idle_seconds * 1000),
                                     max_ms=int(max_seconds * 1000))

    def resume_session(self, session_id: str | None, *,
                       idle_seconds: float) -> tuple[Session, Caller] | None:
        """The live session of a cookie value and its caller (its idle deadline moved on), or
        ``None``: unknown, ended, or its credential revoked (then it is forgotten)."""
        return sessions.resume(self._core, session_id, idle_ms=int(idle_seconds * 1000))

    def close_session(self, session_id: str | None) -> None:
        """Sign out: forget the session in every process."""
        sessions.close(self._core, session_id)

    def caller(self, member_id: str) -> Caller:
        """The caller for a member id (used by in-process integrations and tests)."""
        return self._core.caller_for(member_id)

    def memory_git_backend(self) -> tuple[ReviewStore, Callable[[Changeset], None]]:
        """Memory Git's review tables over the service's store (one database, one transaction
        per write) and the projector that applies a changeset accepted on
        ``refs/shared/main`` to records and the search index (call it inside the store's write
        transaction)."""
        core = self._core

        def project(cs: Changeset) -> None:
            for op in cs.ops:
                core.apply(cs, op)

        return self._store.review_store(), project

    # --- provenance (docs/provenance.md) --------------------------------------------------------
    def provenance_keys(self) -> Wire:
        """The published key set: every public key that signed for this server."""
        return self.server_keys.published()

    def rotate_server_key(self) -> Wire:
        """Make a new signing key; the old public key stays published (retired)."""
        return self.server_keys.rotate()

    def export_git(self, directory: Path, memory_id: str | None = None,
                   progress: Callable[[int], None] | None = None) -> Wire:
        """Operator: write the history of one memory (or all) as a new bare Git repository —
        one commit per changeset with its canonical bytes and signatures, refs mirroring the
        memory's, a signed statement of their heads (docs/provenance.md)."""
        from palimpsest.service.provenance import export  # noqa: PLC0415 — pygit2, rare

        return export.export(self._store, self.server_keys, directory, memory_id, progress)

    def import_git(self, source: Path, *, keys: dict[str, str] | None, mode: str = "accepted",
                   member_id: str | None = None, budgets: Budgets | None = None) -> Wire:
        """Operator: bring an export (``pal export --git``) into this server through
        quarantine → validate → promote (docs/provenance.md). ``keys`` ``None`` trusts the keys
        the export carries. ``mode`` ``reviewed`` lands it on import refs and opens a merge
        request into ``refs/shared/main`` where this server has one."""
        from palimpsest.service.provenance import importer  # noqa: PLC0415 — pygit2, rare

        report = importer.import_git(self._core, self.data_dir, source, keys=keys, mode=mode,
                                     member_id=member_id,
                                     budgets=budgets or importer.DEFAULT_BUDGETS)
        if mode == "reviewed" and report.get("promoted"):
            flow = self._review_gate().flow
            for mem in report["memories"]:
                source_ref = f"refs/topics/imports/{report['transaction']}/shared/main"
                here = self._store.ref(mem["memory_id"], SHARED_MAIN)
                if here is None or not here.head or not any(
                        r["ref"] == source_ref for r in mem["refs"]):
                    mem["proposal_note"] = ("this server has no refs/shared/main for the "
                                            "memory to propose into: import it as accepted")
                    continue
                proposal, _made = flow.propose(
                    f"member:{report['member_id']}", mem["memory_id"],
                    {"source_ref": source_ref, "idempotency_key": f"import-{report['transaction']}",
                     "message": f"import from {report['source']}"[:4096]})
                mem["proposal_id"] = proposal["proposal_id"]
        return report

    def register_key(self, caller: Caller, body: Wire, *,
                     idempotency_key: str | None = None) -> Wire:
        """Register a public key the caller signs its own changesets with."""
        return provenance.register_key(self._core, caller, body, idempotency_key)

    def list_keys(self, caller: Caller) -> Wire:
        """The caller's registered keys."""
        return provenance.list_keys(self._core, caller)

    def revoke_key(self, caller: Caller, key_id: str, *,
                   idempotency_key: str | None = None) -> Wire:
        """Stop one of the caller's keys from signing anything new."""
        return provenance.revoke_key(self._core, caller, key_id, idempotency_key)

    def changeset_signatures(self, caller: Caller, memory_id: str, changeset_id: str) -> Wire:
        """A changeset's canonical bytes and its signatures."""
        return provenance.changeset_signatures(self._core, caller, memory_id, changeset_id)

    def sign_changeset(self, caller: Caller, memory_id: str, changeset_id: str,
                       body: Wire, *, idempotency_key: str | None = None) -> Wire:
        """Keep the author's own signature of its changeset (checked first)."""
        return provenance.countersign(self._core, caller, memory_id, changeset_id, body,
                                      idempotency_key)

    def rebuild(self, *, repair: bool = False) -> Wire:
        """Re-derive every projection (records, versions, search index) from the changesets,
        verifying each changeset's integrity digest, and compare. Serves ``pal admin
        rebuild``; returns ``{object, verified, changesets, records, versions, indexed, equal,
        digest_before, digest_after, differences, written}``. ``equal`` is false when the
        stored projections differ from what the history makes (changed outside the service);
        ``differences`` then names the rows. Nothing is written unless ``repair`` is set."""
        return self._core.rebuild(repair=repair)

    def mount_repository(self, memory_id: str, path: Path | str) -> Wire:
        """Operator (``pal admin mount-repo``): make the Git repository at ``path`` — its
        ``hn-memory/0`` streams — the provider of the empty memory ``memory_id``
        (docs/service.md, "Repository memory"). Raises memory_not_found, memory_invalid (a
        missing path, not a repository's top, no commit, already mounted, not empty)."""
        return mounts.mount(self._store, memory_id, path, self._core.now_ms())

    # --- discovery and providers --------------------------------------------------------------
    def providers(self, caller: Caller) -> Wire:
        """``GET /v1/memories/providers`` → ``{object:"list", data:[capability document]}``."""
        return {"object": "list", "data": [providers.capability_document(),
                                           providers.repository_capability_document()]}

    def types(self, caller: Caller) -> Wire:
        """``GET /v1/memories/types`` → core and server types."""
        return providers.types_list()

    # --- memories (the tree) ------------------------------------------------------------------
    def create_memory(self, caller: Caller, body: Wire, *,
                      idempotency_key: str | None = None) -> Wire:
        """``POST /v1/memories`` ``{name, description?, parent_id?, restricted?, provider?}``.

        Needs ``create`` on the parent (a root needs nothing). The creator holds all four
        privileges implicitly. Raises memory_invalid, memory_not_found (parent),
        memory_forbidden, memory_unsupported (unknown provider).
        """
        return tree.create_memory(self._core, caller, body, idempotency_key)

    def list_memories(self, caller: Caller, *, parent: str | None = None,
                      ancestor: str | None = None, granted: bool = False, limit: int = 50,
                      cursor: str | None = None) -> Wire:
        """``GET /v1/memories`` → ``{object:"list", data, next}``; entry points by default,
        ``parent`` = direct readable children, ``ancestor`` = every readable descendant,
        ``granted`` = entry points plus nodes where privileges differ, highest first.
        Raises memory_not_found (parent/ancestor), memory_invalid (bad cursor/limit/combination).
        """
        return tree.list_memories(self._core, caller, parent=parent, ancestor=ancestor,
                                  granted=granted, limit=limit, cursor=cursor)

    def get_memory(self, caller: Caller, memory_id: str) -> Wire:
        """``GET /v1/memories/{id}`` (any privilege). Raises memory_not_found."""
        return tree.get_memory(self._core, caller, memory_id)

    def update_memory(self, caller: Caller, memory_id: str, body: Wire, *,
                      idempotency_key: str | None = None) -> Wire:
        """``PUT /v1/memories/{id}`` ``{name?, description?, parent_id?, restricted?}``.

        name/description need ``write``; ``restricted`` and ``parent_id`` (move) need
        ``delete`` here, and a move needs ``create`` on the new parent. Raises memory_invalid
        (cycle, bad body, provider change), memory_forbidden, memory_not_found, memory_busy.
        """
        return tree.update_memory(self._core, caller, memory_id, body, idempotency_key)

    def delete_memory(self, caller: Caller, memory_id: str, *,
                      idempotency_key: str | None = None) -> Wire:
        """``DELETE /v1/memories/{id}`` (delete) → ``{id, object:"memory", deleted:true,
        memories:[ids removed]}``; removes descendants, their records and file bytes."""
        return tree.delete_memory(self._core, caller, memory_id, idempotency_key)

    # --- grants -------------------------------------------------------------------------------
    def list_grants(self, caller: Caller, memory_id: str) -> Wire:
        """``GET /v1/memories/{id}/grants`` → grants on the node and inherited ones (each naming
        its node, ``inherited``), as far up as the cutoff. Needs read."""
        return tree.list_grants(self._core, caller, memory_id)

    def grant_holders(self, caller: Caller, memory_id: str) -> Wire:
        """:meth:`list_grants` for a holder of ``delete`` here, each grant with ``holder:
        {name, type?}`` (member or group, ``null`` if gone). Raises memory_forbidden
        without delete, memory_not_found."""
        return tree.grant_holders(self._core, caller, memory_id)

    def put_grant(self, caller: Caller, memory_id: str, body: Wire, *,
                  idempotency_key: str | None = None) -> Wire:
        """``POST /v1/memories/{id}/grants`` ``{principal:"member:…"|"group:…", privileges}``
        (delete). A second grant to the same principal on the node replaces the first."""
        return tree.put_grant(self._core, caller, memory_id, body, idempotency_key)

    def delete_grant(self, caller: Caller, memory_id: str, grant_id: str, *,
                     idempotency_key: str | None = None) -> Wire:
        """``DELETE /v1/memories/{id}/grants/{grant_id}`` (delete) →
        ``{id, object:"memory.grant", deleted:true}``."""
        return tree.delete_grant(self._core, caller, memory_id, grant_id, idempotency_key)

    # --- records ------------------------------------------------------------------------------
    def remember(self, caller: Caller, memory_id: str, body: Wire, *,
                 idempotency_key: str | None = None) -> Wire:
        """``POST /v1/memories/{id}/records`` ``{type?, title?, content, attributes?,
        references?, time?}`` (write) → record v1. One changeset on refs/shared/main.
        Raises memory_invalid (bad body, second subject/object, oversized), memory_unsupported
        (unkept media type), memory_not_found, memory_forbidden.

        In a memory that requires review (Memory Git settings, docs/memory-git.md) a write by a
        reviewed member type does not change accepted memory: it lands on the writer's
        ``refs/agents/<member>/main`` and opens a proposal; the answer is then
        ``{"object": "memory.pending_review", …}`` (HTTP 202)."""
        gate = self._review_gate()
        if gate.requires_review(memory_id, caller.member.type):
            return gate.write(f"member:{caller.member.id}", memory_id, body,
                              idempotency_key=idempotency_key or f"auto-{uuid.uuid4()}")
        return records.remember(self._core, caller, memory_id, body, idempotency_key)

    def remember_many(self, calls: Sequence[RememberCall]) -> list[Wire | Exception]:
        """Several :meth:`remember` calls at once, grouped into one transaction where that
        changes nothing a caller can see (:mod:`palimpsest.service.grouped`): each write keeps
        its own changeset, idempotency and outcome, and every outcome is returned only once
        it is durable. Returns each call's result or the error that call raised, in order."""
        def solo(call: RememberCall) -> Wire:
            return self.remember(call.caller, call.memory_id, call.body,
                                 idempotency_key=call.idempotency_key)

        return grouped.remember_group(self._core, self._review_gate().requires_review, solo,
                                      calls)

    def _review_gate(self) -> ReviewedWrites:
        if self._reviewed is None:
            self._reviewed = ReviewedWrites(open_flow(self))
        return self._reviewed

    def list_records(self, caller: Caller, memory_id: str, *, type: str | None = None,
                     include: str | list[str] = "active", as_of: str | None = None,
                     limit: int = 50, cursor: str | None = None) -> Wire:
        """``GET /v1/memories/{id}/records`` (read) → ``{object:"list", data, next, parent?,
        children}``; newest first; ``limit`` ≤ 200. ``include`` may add ``provenance``: a
        receipt on every record (docs/provenance.md)."""
        status, receipts = split_include(include)
        answer = records.list_records(self._core, caller, memory_id, type=type,
                                      include=status or "active", as_of=as_of, limit=limit,
                                      cursor=cursor)
        return self._with_receipts(caller, answer, receipts)

    def get_record(self, caller: Caller, memory_id: str, record_id: str, *,
                   as_of: str | None = None, include: str | list[str] | None = None) -> Wire:
        """``GET /v1/memories/{id}/records/{rid}`` (read). A record of another memory asked
        through this one raises memory_record_not_found. ``include: provenance`` adds the
        record's receipt."""
        _, receipts = split_include(include)
        answer = records.get_record(self._core, caller, memory_id, record_id, as_of)
        return self._with_receipts(caller, answer, receipts)

    def _receipt_maker(self) -> Receipts:
        if self._receipts is None:
            self._receipts = Receipts(self._core, self.server_keys,
                                      self._store.review_store)
        return self._receipts

    def _with_receipts(self, caller: Caller, answer: Wire, wanted: bool) -> Wire:
        if not wanted:
            return answer
        return self._receipt_maker().attach(caller, answer)

    def _judge(self, wanted: trust.TrustFilter | None) -> trust.Judge | None:
        """What admits a record under a provenance filter (``None``: everything)."""
        if wanted is None or wanted.empty:
            return None
        return trust.Judge(self._core, self._receipt_maker().review_of, wanted)

    def _body_include(self, body: Wire) -> tuple[Wire, bool]:
        """A read body's ``include`` less ``provenance`` (what the operation knows)."""
        if not isinstance(body, dict) or "include" not in body:
            return body, False
        status, receipts = split_include(body["include"])
        rest = {k: v for k, v in body.items() if k != "include"}
        if status is not None:
            rest["include"] = status
        return rest, receipts

    def record_history(self, caller: Caller, memory_id: str, record_id: str) -> Wire:
        """``GET …/records/{rid}/history`` (read) → ``{object:"list", data:[versions oldest
        first]}``."""
        return records.record_history(self._core, caller, memory_id, record_id)

    def record_content(self, caller: Caller, memory_id: str, record_id: str,
                       index: int) -> FileBytes:
        """``GET …/records/{rid}/content/{index}`` (read): a file part's bytes, exactly.
        Raises memory_record_not_found when the part does not exist or is not a file."""
        return records.record_content(self._core, caller, memory_id, record_id, index)

    def revise(self, caller: Caller, memory_id: str, record_id: str, body: Wire, *,
               idempotency_key: str | None = None) -> Wire:
        """``PATCH …/records/{rid}`` (write): at least one of title, content, attributes,
        references, time → the new version (the old one becomes superseded)."""
        return records.revise(self._core, caller, memory_id, record_id, body, idempotency_key)

    def forget(self, caller: Caller, memory_id: str, record_id: str, *,
               idempotency_key: str | None = None) -> Wire:
        """``DELETE …/records/{rid}`` (write) → the record with ``status:"forgotten"``; the
        trace is kept in history."""
        return records.forget(self._core, caller, memory_id, record_id, idempotency_key)

    def erase(self, caller: Caller, memory_id: str, body: Wire, *,
              idempotency_key: str | None = None) -> Wire:
        """``POST /v1/memories/{id}/erase`` ``{record_ids:[…]}`` (delete; never an agent tool)
        → ``{object:"memory.erasure", erased, unreachable}``. Content bytes of every version
        are removed; ids not in this memory are reported ``unreachable``."""
        return records.erase(self._core, caller, memory_id, body, idempotency_key)

    def upload_file(self, caller: Caller, data: bytes, *, name: str, media_type: str,
                    idempotency_key: str | None = None) -> Wire:
        """``POST /v1/files`` → ``{id, object:"file", name, media_type, bytes, sha256}``.
        Raises memory_unsupported for a media type the provider does not keep,
        memory_invalid when too large."""
        return records.upload_file(self._core, caller, data, name, media_type,
                                   idempotency_key)

    # --- observe and jobs ---------------------------------------------------------------------
    def observe(self, caller: Caller, memory_id: str, body: Wire, *,
                idempotency_key: str | None = None) -> Wire:
        """``POST /v1/memories/{id}/observe`` ``{episodes:[{content, attributes?}]}`` (write)
        → ``{object:"list", data:[episode records], job:{object:"memory.job", id, status}}``.
        The built-in provider keeps episodes at once, so ``job.status`` is ``completed`` and
        the API answers 200 (202 only when a job is still pending)."""
        return observe.observe(self._core, caller, memory_id, body, idempotency_key)

    def get_job(self, caller: Caller, memory_id: str, job_id: str) -> Wire:
        """``GET /v1/memories/{id}/jobs/{job}`` (read) → the job with its records."""
        return observe.get_job(self._core, caller, memory_id, job_id)

    # --- recall, graph, prime -----------------------------------------------------------------
    def recall(self, caller: Caller, memory_id: str, body: Wire) -> Wire:
        """``POST /v1/memories/{id}/recall`` (read) → ``memory.recall`` (uhp-memories.md §7).

        Reads accepted memory. With ``"x.pal.include_pending": true`` the answer also carries
        ``x.pal.pending``: the caller's own memories still waiting for review (its
        ``refs/agents/<member>/main`` beyond accepted memory), kept apart from ``results``.
        ``x.pal.provenance`` admits only records whose provenance has what it names
        (:mod:`.provenance.trust`); the answer repeats the filter it applied."""
        body, receipts = self._body_include(body)
        if receipts:
            return self._with_receipts(caller, self.recall(caller, memory_id, body), True)
        admit, applied = None, None
        asked = isinstance(body, dict) and trust.FIELD in body
        if isinstance(body, dict) and trust.FIELD in body:
            body = dict(body)
            wanted = trust.parse(body.pop(trust.FIELD))
            judge = self._judge(wanted)
            admit, applied = (judge.admits if judge else None), wanted
        flag = None
        if isinstance(body, dict) and "x.pal.include_pending" in body:
            body = dict(body)
            flag = body.pop("x.pal.include_pending")
        answer = recall.recall(self._core, caller, memory_id, body, admit)
        if asked:
            answer[trust.FIELD] = applied.to_wire() if applied else None
        if flag is True:
            words = " ".join(str(body.get(k) or "") for k in ("query", "text")).strip()
            answer["x.pal.pending"] = self._review_gate().pending(
                f"member:{caller.member.id}", memory_id, words, int(body.get("limit") or 8))
        return answer

    def graph(self, caller: Caller, memory_id: str, body: Wire) -> Wire:
        """``POST /v1/memories/{id}/graph`` (read) → ``memory.graph`` (§8); ``include:
        ["provenance"]`` adds a receipt to every record node."""
        body, receipts = self._body_include(body)
        return self._with_receipts(caller, graph.graph(self._core, caller, memory_id, body),
                                   receipts)

    def prime(self, caller: Caller, memory_id: str, budget: int, *,
              include: str | list[str] | None = None, provenance: Any = None) -> Wire:
        """``GET /v1/memories/{id}/prime?budget=N`` (read) → ``{object:"memory.prime",
        memory_id, text, tokens, budget, records:[ids], truncated}``: standing records
        (active, ``attributes.standing`` true) within ``budget`` tokens; ``include:
        provenance`` adds ``provenance``, a receipt per placed record. ``provenance``: a
        filter (:mod:`.provenance.trust`); by default, in a memory that requires review, an
        agent's write that no review admitted is left out (``"any"``: everything)."""
        _, receipts = split_include(include)
        judge = self._prime_judge(memory_id, provenance)
        answer = prime.prime(self._core, caller, memory_id, budget,
                             judge.admits if judge else None)
        if judge is not None:  # says which records it left out by their provenance
            answer[trust.FIELD] = judge.wanted.to_wire()
        return self._with_receipts(caller, answer, receipts)

    def _prime_judge(self, memory_id: str, provenance: Any) -> trust.Judge | None:
        """The provenance judge of a prime: the caller's filter, or by default, in a memory
        that requires review, one that leaves out an agent's write no review admitted."""
        if provenance is None:
            wanted: trust.TrustFilter | None = trust.TrustFilter(
                unreviewed_agents=not self._review_gate().requires_review(memory_id, "agent"))
        else:
            wanted = trust.parse(provenance)
        return self._judge(wanted)

    def prime_preview(self, caller: Caller, memory_id: str, budget: int,
                      proposal_id: str) -> Wire:
        """The prime now and as it would be if an open proposal of this memory were merged
        into ``refs/shared/main`` (computed, nothing written) → ``{object:
        "memory.prime_preview", memory_id, budget, now, after}``. Raises memory_not_found,
        proposal-not-found (unknown, unseen or another memory's), proposal-closed."""
        self.get_memory(caller, memory_id)  # an unseen memory answers as for every route
        _, pending = dossier.pending(self._flow(), _principal(caller), proposal_id, memory_id)
        judge = self._prime_judge(memory_id, None)  # what the agent's prime admits
        answer = prime.preview(self._core, caller, memory_id, budget, pending,
                               judge.admits if judge else None)
        if judge is not None:
            for block in ("now", "after"):
                answer[block][trust.FIELD] = judge.wanted.to_wire()
        return answer

    # --- review (what a reviewer reads; the flow itself is Memory Git's) ----------------------
    def review_queue(self, caller: Caller) -> list[tuple[Wire, list[Wire]]]:
        """Open proposals in every memory the caller may read, by memory (newest first, each
        with its ``summary``); memories without an open proposal are left out."""
        return [(self.get_memory(caller, project), items)
                for project, items in dossier.queue(self._flow(), _principal(caller))]

    def list_proposals(self, caller: Caller, memory_id: str, *,
                       open_only: bool = False) -> list[Wire]:
        """Proposals of one memory, newest first, each with its ``summary``. Raises
        memory_not_found."""
        self.get_memory(caller, memory_id)
        return dossier.proposals(self._flow(), _principal(caller), memory_id,
                                 open_only=open_only)

    def open_proposal_counts(self, caller: Caller, memory_ids: Sequence[str]) -> dict[str, int]:
        """Open proposals per memory, for the memories of ``memory_ids`` the caller may read
        (the others are left out)."""
        return dossier.open_counts(self._flow(), _principal(caller), memory_ids)

    def review_dossier(self, caller: Caller, proposal_id: str) -> dossier.Dossier:
        """Everything a review of a proposal reads (:class:`dossier.Dossier`): staleness,
        conflicts recorded and detected now, near-duplicates in shared memory, every op's
        fields before and after, the member types of everyone named. Raises
        proposal-not-found for an unknown proposal and one of an unseen memory alike."""
        def similar(project: str, text: str) -> list[Wire]:
            answer = self.recall(caller, project, {"text": text,
                                                   "limit": dossier.DUPLICATE_HITS})
            return list(answer["results"])

        def member_type(principal: str) -> str | None:
            kind, _, ident = principal.partition(":")
            found = self._store.member(ident) if kind == "member" else None
            return found.type if found is not None else None

        return dossier.build(self._flow(), _principal(caller), proposal_id, similar=similar,
                             recorded=self._recorded, member_type=member_type)

    def _recorded(self, memory_id: str, record_id: str) -> Wire | None:
        with self._store.read():
            head = self._store.record_head(record_id)
            body = (self._core.body(head.body_digest)
                    if head is not None and head.memory_id == memory_id else None)
        return projection.before_values(body) if body is not None else None

    def _flow(self) -> ReviewFlow:
        return self._review_gate().flow

    # --- named queries, free queries, type operations -----------------------------------------
    def list_queries(self, caller: Caller, memory_id: str) -> Wire:
        """``GET /v1/memories/{id}/queries`` (read)."""
        return queries.list_queries(self._core, caller, memory_id)

    def put_query(self, caller: Caller, memory_id: str, name: str, body: Wire, *,
                  idempotency_key: str | None = None) -> Wire:
        """``PUT /v1/memories/{id}/queries/{name}`` (write) ``{description, params, requires,
        language:"recall", body}``: ``body`` is a recall request whose ``"$name"`` strings are
        replaced by params."""
        return queries.put_query(self._core, caller, memory_id, name, body, idempotency_key)

    def run_query(self, caller: Caller, memory_id: str, name: str, body: Wire) -> Wire:
        """``POST /v1/memories/{id}/queries/{name}`` (the query's ``requires``) ``{params}`` →
        recall-shaped answer."""
        return queries.run_query(self._core, caller, memory_id, name, body)

    def free_query(self, caller: Caller, memory_id: str, body: Wire) -> Wire:
        """``POST /v1/memories/{id}/query``: not offered by the built-in provider → always
        memory_unsupported (after the memory is resolved)."""
        with self._store.read():
            self._core.resolve(caller, memory_id, "read")
        raise unsupported("the built-in provider offers no free query language")

    def operate(self, caller: Caller, memory_id: str, record_id: str, name: str,
                body: Wire) -> Wire:
        """``POST …/records/{rid}/operations/{name}``: no type declares operations →
        memory_unsupported (after memory and record are resolved)."""
        records.get_record(self._core, caller, memory_id, record_id, None)
        raise unsupported(f"no type of the built-in provider declares an operation {name!r}"[:200])

    # --- snapshots and consolidations ---------------------------------------------------------
    def create_snapshot(self, caller: Caller, memory_id: str, body: Wire, *,
                        idempotency_key: str | None = None) -> Wire:
        """``POST /v1/memories/{id}/snapshots`` (write) ``{name, message?}`` → snapshot naming
        the current head of refs/shared/main and the instant."""
        return snapshots.create_snapshot(self._core, caller, memory_id, body, idempotency_key)

    def list_snapshots(self, caller: Caller, memory_id: str) -> Wire:
        """``GET /v1/memories/{id}/snapshots`` (read), newest first."""
        return snapshots.list_snapshots(self._core, caller, memory_id)

    def consolidate(self, caller: Caller, memory_id: str, body: Wire, *,
                    idempotency_key: str | None = None) -> Wire:
        """``POST /v1/memories/{id}/consolidations`` (write) ``{budget?}`` → a completed run of
        the deterministic consolidator (duplicate active records are forgotten in favour of the
        oldest; written by the provider on behalf of the caller)."""
        return consolidation.consolidate(self._core, caller, memory_id, body, idempotency_key)

    def list_consolidations(self, caller: Caller, memory_id: str) -> Wire:
        """``GET /v1/memories/{id}/consolidations`` (read), newest first."""
        return consolidation.list_consolidations(self._core, caller, memory_id)

    def get_consolidation(self, caller: Caller, memory_id: str, run_id: str) -> Wire:
        """``GET …/consolidations/{run}`` (read). Unknown run → memory_record_not_found."""
        return consolidation.get_consolidation(self._core, caller, memory_id, run_id)

    def consolidation_changes(self, caller: Caller, memory_id: str, run_id: str) -> Wire:
        """``GET …/consolidations/{run}/changes`` (read) → ``{object:"list",
        data:[{change, record}]}``."""
        return consolidation.consolidation_changes(self._core, caller, memory_id, run_id)

    def revert_consolidation(self, caller: Caller, memory_id: str, run_id: str, *,
                             idempotency_key: str | None = None) -> Wire:
        """``POST …/consolidations/{run}/revert`` (delete): appends new versions that undo the
        run → the run with ``status`` unchanged and ``reverted_at`` set."""
        return consolidation.revert_consolidation(self._core, caller, memory_id, run_id,
                                           idempotency_key)

    # --- harness memory settings --------------------------------------------------------------
    def harness_memories(self, caller: Caller, harness_id: str) -> Wire:
        """``GET /v1/harnesses/{id}/memories`` → ``harness.memories``; the harness is the agent
        member ``harness_id``; readable by that member or an admin."""
        return harness.harness_memories(self._core, caller, harness_id)

    def set_harness_memories(self, caller: Caller, harness_id: str, body: Wire, *,
                             idempotency_key: str | None = None) -> Wire:
        """``PUT /v1/harnesses/{id}/memories`` ``{default_memory_id?, observe?}``; the default
        must be writable by the agent, else memory_invalid."""
        return harness.set_harness_memories(self._core, caller, harness_id, body,
                                           idempotency_key)

    # --- Memory Git history (read side; review.py adds proposals) -----------------------------
    def list_refs(self, caller: Caller, memory_id: str) -> Wire:
        """Refs of a memory (read) → ``{object:"list", data:[ref]}``."""
        return gitlog.list_refs(self._core, caller, memory_id)

    def list_changesets(self, caller: Caller, memory_id: str, *,
                        ref: str = "refs/shared/main", limit: int = 20) -> Wire:
        """Changesets reachable from ``ref``, newest first (read); ``limit`` ≤ 200."""
        return gitlog.list_changesets(self._core, caller, memory_id, ref=ref, limit=limit)

    def get_changeset(self, caller: Caller, memory_id: str, changeset_id: str) -> Wire:
        """One changeset of the memory (read), integrity verified on read."""
        return gitlog.get_changeset(self._core, caller, memory_id, changeset_id)


def _principal(caller: Caller) -> str:
    """The Memory Git principal of a caller."""
    return f"member:{caller.member.id}"
