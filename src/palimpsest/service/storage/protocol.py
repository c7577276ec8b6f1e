"""The storage interface of the memory service: what the core asks of a store, and nothing of
how a store keeps it.

:class:`Store` is what :class:`palimpsest.service.core.Core` and the operation modules are
typed against; :class:`palimpsest.service.storage.sqlite.SqliteStore` (the embedded default)
implements it, and a server database implements the same protocol. The contract every
implementation keeps:

- **Transactions are context managers.** ``with store.write():`` is one atomic transaction
  (nested calls join it); everything a write does — changeset, ref, projection, index,
  idempotent response — commits together or not at all. ``with store.read():`` is a
  consistent snapshot.
- **A memory's writers are serialised** by :meth:`Store.lock_memory` for the rest of the
  write transaction (SQLite: its one writer already is; a server database: a
  transaction-scoped advisory lock on the memory).
- **Refs move by compare-and-swap in the store** (:meth:`Store.advance_ref`): the head moves
  only while it still holds the expected value, else ``cas_mismatch`` and nothing moves.
- **Idempotency by a unique key**: (principal, scope, key) is unique; a second first use of a
  key fails inside the store, never silently.
- **Values, not rows**: every read returns core values (:mod:`palimpsest.service.model`) or the
  plain values of :mod:`.rows`; no driver type crosses this line, and no SQL text either.
- **Search takes analysed terms**, never a query language: ranking statistics and candidates
  are asked of the store restricted to the memory ids of the caller's reach; scoring beyond
  BM25 candidates is :mod:`palimpsest.search`'s, so every backend ranks alike.
- **Bodies are content-addressed** (SHA-256 of their canonical bytes), stored once, and erase
  removes them while the changesets keep the digests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final, Protocol

from palimpsest.service.model import (
    AuditEntry,
    Changeset,
    Credential,
    Grant,
    Group,
    Member,
    MemberKey,
    Memory,
    Ref,
    Session,
    Signature,
)
from palimpsest.service.storage.rows import Edge, Hit, RecordHead, StoredFile, StoredVersion

# How long a write waits for the writers of other processes (pal serve --workers, pal admin)
# before it is refused with 503 and Retry-After (``model.store_busy``); nothing of a refused
# write is kept. Every store takes it.
WRITE_WAIT_SECONDS: Final = 5.0


class Store(Protocol):
    """What the memory service core needs of a store (see the module docs for the contract)."""

    # --- transactions --------------------------------------------------------------------------
    def write(self) -> AbstractContextManager[None]:
        """One write transaction: all of it commits, or none of it (nested calls join it)."""

    def read(self) -> AbstractContextManager[None]:
        """A consistent read (one snapshot for everything read inside it)."""

    def lock_memory(self, memory_id: str) -> None:
        """Serialise the writers of one memory until the write transaction ends. SQLite's
        ``BEGIN IMMEDIATE`` already serialises every writer of the file, so there is nothing
        more to take here; a server database takes a transaction-scoped advisory lock."""

    def changes(self) -> int:
        """Rows inserted, updated or deleted on this connection so far (triggers included):
        a write that did not move it left nothing to undo."""

    def close(self) -> None:
        """Close the connection (idempotent)."""

    def review_store(self) -> ReviewStore:
        """Memory Git's review tables over this store, in the same transactions (made once)."""

    # --- tree and grants -----------------------------------------------------------------------
    def tree_generation(self) -> int:
        """Bumped on every change of the tree or grants (caches key on it)."""

    def bump_tree(self) -> None:
        """Invalidate tree caches (inside a write)."""

    def all_memories(self) -> list[Memory]:
        """Every memory (the tree is small next to the records)."""

    def all_grants(self) -> list[Grant]:
        """Every explicit grant."""

    def insert_memory(self, m: Memory) -> None:
        """Add a node."""

    def update_memory(self, m: Memory) -> None:
        """Replace a node's client fields."""

    def delete_memories(self, ids: Sequence[str]) -> None:
        """Remove nodes with everything they hold: grants, history (on every ref), bodies,
        file bytes, projections, docs."""

    def record_counts(self, ids: Sequence[str]) -> dict[str, int]:
        """Active record counts per memory (kept by the projection, not counted per read)."""

    def mount_repository(self, memory_id: str, provider: str, path: str, now: int) -> None:
        """Make ``provider`` (a repository's streams at ``path``) keep a memory's records: the
        memory's provider and its mount row change together, inside a write."""

    def mounts(self) -> dict[str, str]:
        """The repository path of every mounted memory, by memory id."""

    def upsert_grant(self, g: Grant) -> Grant:
        """One grant per principal per node: a second replaces the first (keeping its id)."""

    def delete_grant(self, memory_id: str, grant_id: str) -> bool:
        """Remove one grant; False when the node has no such grant."""

    # --- the audit log -------------------------------------------------------------------------
    def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        """Append audit entries in order (inside a write). The table is append-only: rows are
        never updated, and deleted only by :meth:`prune_audit`. Plain SQL: ``INSERT``."""

    def audit_entries(self, *, member_id: str | None = None, memory_id: str | None = None,
                      outcome: str | None = None, since: int | None = None,
                      until: int | None = None, limit: int = 100) -> list[AuditEntry]:
        """Entries matching every given filter (``since`` ≤ ``at`` < ``until``, epoch ms),
        newest (highest ``seq``) first, at most ``limit``; ``seq`` filled in."""

    def prune_audit(self, before: int) -> int:
        """Delete the entries with ``at`` < ``before`` (inside a write); returns how many."""

    # --- members, groups, credentials ----------------------------------------------------------
    def member(self, member_id: str) -> Member | None:
        """One member or ``None``."""

    def members(self) -> list[Member]:
        """All members, oldest first."""

    def insert_member(self, m: Member) -> None:
        """Add a member."""

    def group(self, group_id: str) -> Group | None:
        """One group with its members."""

    def groups(self) -> list[Group]:
        """Every group."""

    def groups_of(self, member_id: str) -> frozenset[str]:
        """Group ids a member belongs to."""

    def insert_group(self, g: Group) -> None:
        """Add a group."""

    def set_membership(self, group_id: str, member_id: str, present: bool) -> None:
        """Add or remove a membership (idempotent)."""

    def credentials(self, member_id: str | None) -> list[Credential]:
        """Credentials, optionally of one member."""

    def credential_hash(self, credential_id: str) -> tuple[str, str, bool] | None:
        """``(member_id, secret_hash, revoked)`` of a credential."""

    def insert_credential(self, c: Credential, secret_hash: str) -> None:
        """Store a credential by the hash of its secret."""

    def revoke(self, credential_id: str) -> bool:
        """Revoke; False when unknown."""

    def principals_generation(self) -> int:
        """Bumped (by triggers) on every change of members, groups, memberships or
        credentials, whichever process made it."""

    def peek_principals_generation(self) -> int | None:
        """:meth:`principals_generation` read without the store lock, on a second, read-only
        connection that never waits (WAL readers do not wait for the writer): safe to call
        from an event loop while the service thread writes. ``None`` when the read did not
        succeed at once; the caller then takes the ordinary path."""

    # --- review-desk sessions -----------------------------------------------------------------
    # Shared by every process over the store and kept across restarts. A session is stored by
    # the SHA-256 of its id and names its credential by id: nothing in the table signs anyone
    # in. Session writes do not bump the principals generation.
    def insert_session(self, s: Session) -> None:
        """Store a new session (its key is unique)."""

    def session(self, key: str) -> Session | None:
        """The session stored under ``key`` (the SHA-256 of its id), ended or not."""

    def touch_session(self, key: str, idle_until: int) -> bool:
        """Move a stored session's idle deadline; False when it is gone (a sign-out in another
        process wins: a touch never recreates a session)."""

    def delete_session(self, key: str) -> None:
        """Forget one session; an unknown key is ignored."""

    def purge_sessions(self, now: int, member_id: str, keep: int) -> None:
        """Forget every session that ended by ``now`` (``idle_until`` or ``expires_at``, epoch
        ms) and all but the newest ``keep`` live sessions of ``member_id``."""

    # --- history -------------------------------------------------------------------------------
    def ref(self, memory_id: str, name: str) -> Ref | None:
        """One ref or ``None``."""

    def refs(self, memory_id: str) -> list[Ref]:
        """Refs of a memory by name."""

    def advance_ref(self, ref: Ref, *, expected: str | None) -> None:
        """Compare-and-swap: point ``ref.name`` at ``ref.head`` only while it still holds
        ``expected`` (``None``: the ref is new or has no head yet), else cas_mismatch and
        nothing moves. The ref is created when it does not exist and nothing was expected."""

    def insert_changeset(self, cs: Changeset) -> None:
        """Append an immutable changeset (ignored if the same id exists); the payloads it
        keeps apart go to ``bodies``, once each."""

    def changeset(self, cid: str) -> Changeset | None:
        """A stored changeset with its payloads (an erased one's is ``None``); the caller
        verifies its digest."""

    def changesets(self, memory_id: str | None = None) -> Iterator[Changeset]:
        """Every changeset in append order (a topological order), optionally of one memory."""

    # --- signatures and members' keys ---------------------------------------------------------
    def set_signer(self, signer: Callable[[Changeset], Sequence[Signature]] | None) -> None:
        """What signs every changeset :meth:`insert_changeset` stores, in the same transaction
        (the service's identity); ``None``: nothing signs (a migration's target)."""

    def add_signature(self, cid: str, sig: Signature) -> bool:
        """Keep one more (already checked) signature of a stored changeset — a member's own;
        False when no such changeset is stored."""

    def signatures(self, cids: Sequence[str]) -> dict[str, list[Signature]]:
        """The signatures kept for each named changeset (an unsigned one is absent)."""

    def insert_member_key(self, k: MemberKey) -> None:
        """Register a member's (checked) public key; a key registered already, to anyone, is
        a conflict (``key_registered``)."""

    def member_keys(self, member_id: str) -> list[MemberKey]:
        """A member's keys, oldest first, revoked ones included."""

    def revoke_member_key(self, member_id: str, public_key: str) -> bool:
        """Stop a key signing anything new; False when the member has no such key."""

    def replay(self, principal: str, scope: str, key: str) -> tuple[str, Any] | None:
        """``(request digest, stored response)`` for a used key."""

    def remember_response(self, principal: str, scope: str, key: str, digest: str,  # noqa: PLR0917 — the implementation's signature
                          response: Any, now: int) -> None:
        """Store the response of a first request under its key."""

    def forget_responses(self, record_id: str) -> None:
        """Drop stored idempotent responses that name an erased record, whatever the route
        (a UHP write, a Memory Git commit or merge): they may carry its content."""

    # --- bodies and erase ----------------------------------------------------------------------
    def put_body(self, digest: str, data: bytes, bases: Sequence[str] = ()) -> None:
        """Store content-addressed bytes (a record body or a kept-apart payload) once.
        ``bases`` name stored values the bytes were derived from (the payload a merged
        record was made of, the version it revises): a store may keep them as a delta of
        those, so their words take their space once; reading never needs to know. Erasing a
        base never takes a value derived from it along (it is kept whole first)."""

    def body(self, digest: str) -> bytes | None:
        """The bytes stored under ``digest``, ``None`` once erased."""

    def erase_payloads(self, digests: Sequence[str]) -> None:
        """Remove kept-apart payloads (their changesets keep the digests) and tell readers
        that cached history may hold erased content."""

    def erase_generation(self) -> int:
        """Bumped by every erase (caches of verified history key on it)."""

    def compact_after_erase(self) -> None:
        """Make erased bytes unrecoverable from the files: FTS5 keeps deleted terms in old
        index segments until they merge, and the WAL keeps old page images until a
        checkpoint. Rewrites the index (cost grows with its size; erase is rare)."""

    # --- projection ----------------------------------------------------------------------------
    def record_head(self, record_id: str) -> RecordHead | None:
        """The current state of a record, ``None`` when the projection holds none."""

    def project_version(self, *, record_id: str, memory_id: str, version: int, type: str,
                        body_digest: str, written_at: str, written_by: str, extra: str,
                        changeset_id: str, standing: bool, fts_text: str,
                        edges: Sequence[tuple[str, str]] = (), existing: int | None = None,
                        was_forgotten: bool = False, thread: str | None = None,
                        when: str | None = None) -> None:
        """Apply a new version: supersede the previous one, move the record, reindex."""

    def project_forget(self, record_id: str, at: str) -> None:
        """Mark the current version forgotten (its index entry stays; reads filter status)."""

    def project_erase(self, record_id: str) -> list[str]:
        """Remove every version, body and index entry; returns the file sha256s it named."""

    def projection_rows(self) -> dict[str, str]:
        """Every projection row (records with their index text, versions, edges, counts) by
        a key that names it, independent of row numbers, so a rebuild can prove it
        reproduced the same state — and say which rows differ when it did not."""

    def clear_projections(self) -> None:
        """Drop every projection (records, versions, index) before a rebuild."""

    def counts(self) -> dict[str, int]:
        """Row counts reported by a rebuild."""

    # --- record reads --------------------------------------------------------------------------
    def version_row(self, record_id: str, version: int) -> StoredVersion | None:
        """One version with its body."""

    def versions(self, record_id: str) -> list[StoredVersion]:
        """Every version of a record, oldest first."""

    def version_at(self, record_id: str, as_of: str) -> StoredVersion | None:
        """The version current at ``as_of``."""

    def list_current(self, memory_id: str, statuses: Sequence[str], type: str | None,
                     before: int | None, limit: int) -> list[StoredVersion]:
        """Current records of one memory, newest first, keyset-paginated on ``n``."""

    def list_at(self, memory_ids: Sequence[str], as_of: str, limit: int,
                offset: int = 0) -> list[StoredVersion]:
        """Versions current at ``as_of`` across memories, newest first."""

    def current_rows(self, ns: Sequence[int]) -> list[StoredVersion]:
        """Current versions of records by projection row number (order not kept)."""

    def newest_ns(self, memory_ids: Sequence[str], statuses: Sequence[str], limit: int
                  ) -> list[int]:
        """Newest record row numbers across memories (for filter-only recall)."""

    def standing_rows(self, memory_id: str) -> list[StoredVersion]:
        """Active standing records of a memory, oldest first."""

    def memory_of_records(self, record_ids: Sequence[str]) -> dict[str, str]:
        """Which memory holds each record id (for references and graph edges)."""

    def edges_touching(self, record_ids: Sequence[str]) -> list[Edge]:
        """Edges whose source or target is one of ``record_ids`` (``src, dst, rel,
        memory_id`` = the source's memory)."""

    # --- search --------------------------------------------------------------------------------
    def search(self, terms: Sequence[str], memory_ids: Sequence[str],  # noqa: PLR0917 — the implementation's signature
               statuses: Sequence[str], types: Sequence[str] | None, limit: int,
               offset: int = 0, bound: int | None = None) -> list[Hit]:
        """Records of ``memory_ids`` holding any of the analysed ``terms``, with a status in
        ``statuses`` (and a type in ``types``), scored by BM25, best first: ``Hit(row
        number, score, analysed text, thread, when)``. With ``bound``, only the newest
        ``bound`` matches are scored (terms too common to score every posting within the
        latency budget). The terms come from :mod:`palimpsest.search`; how they are matched
        is this store's business (here a quoted FTS5 MATCH expression that can never inject
        syntax)."""

    def term_docs(self, terms: Sequence[str],
                  memory_ids: Sequence[str] | None = None) -> dict[str, int]:
        """How many indexed records of ``memory_ids`` (``None``: of the whole store) hold each
        term: a recall counts within its reach only, so no term (nor a spelling correction)
        is chosen by a record the caller cannot see."""

    def reach_size(self, memory_ids: Sequence[str]) -> tuple[int, int] | None:
        """How many records of ``memory_ids`` the search index holds and their analysed length
        over both columns (every status and type), kept in the write transaction — with
        :meth:`term_docs` the BM25 statistics of a reach; ``None`` when the reach is the whole
        store and :meth:`search`'s own scores already use exactly these statistics."""

    # --- files and documents -------------------------------------------------------------------
    def file(self, fid: str) -> StoredFile | None:
        """One uploaded file."""

    def insert_file(self, fid: str, sha: str, name: str, media_type: str, size: int,  # noqa: PLR0917 — the implementation's signature
                    created_by: str, now: int) -> None:
        """Register an uploaded file."""

    def delete_file(self, fid: str) -> None:
        """Forget an uploaded file's row (its bytes go when no row names them)."""

    def put_file_bytes(self, data: bytes) -> str:
        """Write bytes content-addressed (fsync + atomic rename); returns their sha256."""

    def read_file_bytes(self, sha256: str) -> bytes | None:
        """The bytes, or ``None`` once erased."""

    def put_doc(self, kind: str, did: str, memory_id: str | None, created_at: int,
                doc: Any) -> None:
        """Insert or replace a small document."""

    def doc(self, kind: str, did: str) -> tuple[str | None, Any] | None:
        """``(memory_id, doc)`` or ``None``."""

    def docs(self, kind: str, memory_id: str) -> list[Any]:
        """Documents of one kind for a memory, newest first."""


class ReviewStore(Protocol):
    """What Memory Git's review flow needs of a store: the same history (changesets and refs
    of :class:`Store`) and its own tables — proposals, reviews, single-use merge nonces, the
    advance ledger, manifests, conflicts, settings. The protected advance consumes the nonce,
    moves the ref by CAS, records the advance and closes the proposal in one transaction."""

    # --- transactions --------------------------------------------------------------------------
    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction; Memory Git writes and record projection join it."""

    # --- history -------------------------------------------------------------------------------
    def changeset(self, changeset_id: str) -> Changeset | None:
        """A stored changeset with its payloads (the caller verifies its digest)."""

    def erase_generation(self) -> int:
        """Bumped by every erase: caches of history must be dropped when it moves."""

    def projects(self) -> list[str]:
        """Every project with at least one ref."""

    def ref(self, project: str, name: str) -> dict[str, Any] | None:
        """One ref as a ``MemoryRef`` dict, or None."""

    def refs(self, project: str) -> list[dict[str, Any]]:
        """Every ref of a project, by name."""

    def create_ref(self, project: str, name: str, head: str | None, *, protected: bool,
                   created_by: str, now: str) -> dict[str, Any]:
        """Create a ref; an existing name is a conflict."""

    def commit(self, cs: Changeset, *, request_digest: str | None, advance: bool,
               expected_head: str | None, create_ref: tuple[bool, str] | None,
               now: str) -> None:
        """Store a changeset and, when ``advance``, move its ref by CAS — atomically."""

    def advance(self, project: str, name: str, expected: str | None, new: str,
                now: str) -> None:
        """CAS-advance an unprotected ref (protection is checked by the service)."""

    def advance_protected(self, *, project: str, ref_name: str, expected: str, new: str,
                          nonce: str, advance: dict[str, Any], proposal: dict[str, Any],
                          now: str) -> None:
        """Consume the nonce, CAS the protected ref, record the advance, close the proposal."""

    # --- idempotency ---------------------------------------------------------------------------
    def changeset_by_key(self, project: str, author: str, key: str) -> tuple[str, str] | None:
        """``(changeset_id, request_digest)`` of a Memory Git commit under a key, if any."""

    def proposal_by_key(self, project: str, originator: str, key: str) -> tuple[str, str] | None:
        """``(proposal_id, request_digest)`` stored under an idempotency key, if any."""

    def replay(self, principal: str, scope: str, key: str) -> tuple[str, Any] | None:
        """``(request digest, stored response)`` of a write made under a header key."""

    def remember_response(self, principal: str, scope: str, key: str, *, digest: str,
                          response: Any, now_ms: int) -> None:
        """Keep the response of a first write under its key (same table as UHP writes)."""

    # --- proposals and reviews -----------------------------------------------------------------
    def proposal(self, proposal_id: str) -> dict[str, Any] | None:
        """A stored proposal document."""

    def proposals(self, project: str, status: str | None) -> list[dict[str, Any]]:
        """Proposals of a project, newest first."""

    def put_proposal(self, doc: dict[str, Any], *, key: str | None,
                     request_digest: str | None, conflicts: list[dict[str, Any]]) -> None:
        """Insert or update a proposal (with its conflicts on first insert)."""

    def reviews(self, proposal_id: str) -> list[dict[str, Any]]:
        """Reviews of a proposal, oldest first."""

    def put_review(self, review: dict[str, Any], proposal: dict[str, Any],
                   expected_status: str) -> None:
        """Store a review and the proposal's new state, if the proposal did not change."""

    def nonce_consumed(self, nonce: str) -> bool:
        """Whether a merge nonce has been used."""

    def advances(self, project: str, ref_name: str) -> list[dict[str, Any]]:
        """The protected-ref advance ledger of one ref, oldest first."""

    # --- conflicts, manifests, settings --------------------------------------------------------
    def conflicts(self, project: str, status: str | None, limit: int) -> list[dict[str, Any]]:
        """Persisted conflicts, newest first."""

    def add_conflicts(self, project: str, proposal_id: str,
                      rows: list[dict[str, Any]]) -> None:
        """Persist conflicts for a proposal (an id already stored for it is kept as is)."""

    def set_conflict_status(self, project: str, conflict_id: str, *, proposal_id: str | None,
                            status: str, note: str | None, now: str) -> int:
        """Resolve or retire persisted conflicts; returns how many rows changed."""

    def manifest(self, manifest_id: str) -> dict[str, Any] | None:
        """A stored manifest."""

    def put_manifest(self, doc: dict[str, Any]) -> None:
        """Store a context manifest (immutable)."""

    def settings(self, project: str) -> dict[str, Any]:
        """Per-project Memory Git settings (``{}`` when never set)."""

    def put_settings(self, project: str, doc: dict[str, Any]) -> None:
        """Replace the settings of a project."""



class ImportTarget(Store, Protocol):
    """A new store being filled from one of an older schema (``pal admin migrate`` only)."""

    def import_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
                    ) -> None:
        """Carry rows of an older store over as they are."""

    def import_document(self, table: str, columns: Sequence[str], values: Sequence[Any],
                        doc: Any) -> None:
        """One JSON document row of an older store, its document rewritten."""

    def import_proposal(self, doc: Any, seq: int) -> None:
        """A proposal of an older store; review sequence numbers continue after it."""

    def import_ref(self, ref: Ref) -> None:
        """A ref of an older store, its head already rewritten."""


def hash_secret(secret: str) -> str:
    """How every store keeps a credential: credentials are random 256-bit secrets, so one
    SHA-256 pass (hex) is the right hash."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def changeset_key(key: str) -> str:
    """Where a Memory Git commit's in-body idempotency key lives in the one idempotency table
    (a space: no ``Idempotency-Key`` header can name it, so no UHP key can collide)."""
    return f"changeset {key}"


def proposal_key(key: str) -> str:
    """Where a proposal's in-body idempotency key lives (see :func:`changeset_key`)."""
    return f"proposal {key}"


__all__ = ["WRITE_WAIT_SECONDS", "ImportTarget", "ReviewStore", "Store", "changeset_key",
           "hash_secret", "proposal_key"]
