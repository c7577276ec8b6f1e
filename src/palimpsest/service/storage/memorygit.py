"""SQLite storage of Memory Git, inside the service's one database.

Changesets, refs and idempotency are the service's own tables (``changesets``, ``refs``,
``idempotency`` of :mod:`.sqlite`): one history per memory, whatever wrote it, and one table of
idempotency keys (a Memory Git commit's key is ``changeset <key>`` in its project's scope, a
proposal's ``proposal <key>``). Memory Git adds sibling tables for what only review needs —
proposals, reviews, single-use merge nonces, the protected-advance ledger, manifests, conflicts
and review settings. Every write runs in :meth:`SqliteStore.write` (one ``BEGIN IMMEDIATE``;
nested calls join the outer transaction), and compare-and-swap is re-checked *inside* it.

The protected-ref merge (:meth:`GitStore.advance_protected`) inserts the single-use nonce, moves
the ref, records the advance and closes the proposal in the caller's transaction, which also
projects the merged changesets into records: a lost CAS rolls back everything, so the loser's
nonce is **not** consumed (memory-git.md §14.2, decision recorded in docs/memory-git.md); a
consumed nonce is refused forever, whatever the ref points at later.

Changesets are returned as stored documents; the service verifies their integrity digest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, Protocol

from palimpsest import canonical
from palimpsest.errors import Conflict, NotFound
from palimpsest.service.model import Changeset
from palimpsest.service.storage.protocol import changeset_key, proposal_key
from palimpsest.service.storage.schema import Connection

REVIEW_SCHEMA = """
CREATE TABLE IF NOT EXISTS mg_proposals (
  proposal_id TEXT PRIMARY KEY, project_id TEXT NOT NULL, originator TEXT NOT NULL,
  status TEXT NOT NULL, doc TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS mg_reviews (
  review_id TEXT PRIMARY KEY, proposal_id TEXT NOT NULL, doc TEXT NOT NULL,
  seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS mg_nonces (
  nonce TEXT PRIMARY KEY, project_id TEXT NOT NULL, ref_name TEXT NOT NULL,
  consumed_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mg_advances (
  advance_id TEXT PRIMARY KEY, project_id TEXT NOT NULL, ref_name TEXT NOT NULL,
  doc TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS mg_manifests (
  manifest_id TEXT PRIMARY KEY, project_id TEXT NOT NULL, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mg_conflicts (
  conflict_id TEXT NOT NULL, proposal_id TEXT NOT NULL, project_id TEXT NOT NULL,
  status TEXT NOT NULL, doc TEXT NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY (conflict_id, proposal_id));
CREATE TABLE IF NOT EXISTS mg_settings (
  project_id TEXT PRIMARY KEY, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mg_seq (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER);
INSERT OR IGNORE INTO mg_seq VALUES (1, 0);
"""


class Host(Protocol):
    """What the review tables need of the embedded store they live beside."""

    lock: threading.RLock

    def connection(self) -> Connection:
        """The store's connection (statements run inside its transactions)."""

    def lock_memory(self, memory_id: str) -> None:
        """Serialise the writers of one memory until the write transaction ends."""

    def write(self) -> AbstractContextManager[None]:
        """One write transaction (nested calls join it)."""

    def read(self) -> AbstractContextManager[None]:
        """A consistent read."""

    def changeset(self, cid: str) -> Changeset | None:
        """A stored changeset with its payloads."""

    def insert_changeset(self, cs: Changeset) -> None:
        """Append a changeset."""

    def erase_generation(self) -> int:
        """Bumped by every erase."""

    def replay(self, principal: str, scope: str, key: str) -> tuple[str, Any] | None:
        """``(request digest, stored response)`` for a used key."""

    def remember_response(self, principal: str, scope: str, key: str, digest: str,  # noqa: PLR0917
                          response: Any, now: int) -> None:
        """Store the response of a first request under its key."""


def _dump(doc: Any) -> str:
    return canonical.encode(doc).decode("utf-8")


def _load(text: str) -> Any:
    return canonical.decode(text.encode("utf-8"), allow_floats=True)


class GitStore:
    """Memory Git tables over the service's embedded store (same connection and lock)."""

    def __init__(self, store: Host) -> None:
        """Create the Memory Git tables in ``store``'s database if needed."""
        self.store = store
        self._db = store.connection()
        with store.write():
            for statement in REVIEW_SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction; Memory Git writes and record projection join it."""
        return self.store.write()

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        with self.store.write():
            yield self._db

    def _next(self, db: Connection) -> int:
        db.execute("UPDATE mg_seq SET value = value + 1 WHERE id = 1")
        row = db.execute("SELECT value FROM mg_seq WHERE id = 1").fetchone()
        return int(row[0])

    # --- reads ----------------------------------------------------------------------------
    def _one(self, sql: str, args: tuple[Any, ...]) -> Any:
        with self.store.read():
            return self._db.execute(sql, args).fetchone()

    def _all(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        with self.store.read():
            return self._db.execute(sql, args).fetchall()

    def changeset(self, changeset_id: str) -> Changeset | None:
        """A stored changeset with its payloads (the caller verifies its digest)."""
        with self.store.read():
            return self.store.changeset(changeset_id)

    def erase_generation(self) -> int:
        """Bumped by every erase: caches of history must be dropped when it moves."""
        with self.store.read():
            return self.store.erase_generation()

    def _by_key(self, principal: str, scope: str, key: str) -> tuple[str, str] | None:
        with self.store.read():
            found = self.store.replay(principal, scope, key)
        return (str(found[1]["id"]), found[0]) if found is not None else None

    def changeset_by_key(self, project: str, author: str, key: str) -> tuple[str, str] | None:
        """``(changeset_id, request_digest)`` of a Memory Git commit under a key, if any."""
        return self._by_key(author, project, changeset_key(key))

    def projects(self) -> list[str]:
        """Every project with at least one ref."""
        return [r[0] for r in self._all("SELECT DISTINCT memory_id FROM refs ORDER BY 1", ())]

    def ref(self, project: str, name: str) -> dict[str, Any] | None:
        """One ref as a ``MemoryRef`` dict, or None."""
        row = self._one("SELECT memory_id, name, head, protected, created_at, updated_at, "
                        "created_by FROM refs WHERE memory_id = ? AND name = ?",
                        (project, name))
        return _ref(row) if row else None

    def refs(self, project: str) -> list[dict[str, Any]]:
        """Every ref of a project, by name."""
        rows = self._all("SELECT memory_id, name, head, protected, created_at, updated_at, "
                         "created_by FROM refs WHERE memory_id = ? ORDER BY name",
                         (project,))
        return [_ref(r) for r in rows]

    def proposal(self, proposal_id: str) -> dict[str, Any] | None:
        """A stored proposal document."""
        row = self._one("SELECT doc FROM mg_proposals WHERE proposal_id = ?", (proposal_id,))
        return dict(_load(row[0])) if row else None

    def proposal_by_key(self, project: str, originator: str, key: str) -> tuple[str, str] | None:
        """``(proposal_id, request_digest)`` stored under an idempotency key, if any."""
        return self._by_key(originator, project, proposal_key(key))

    def _claim(self, principal: str, scope: str, key: str, digest: str,  # noqa: PLR0917
               object_id: str, now: str) -> None:
        """Record a key's first use in the one idempotency table; a concurrent first use of
        the same key is a conflict (the unique key decides, in SQLite as in a server DB)."""
        self.store.remember_response(principal, scope, key, digest, {"id": object_id},
                                     _epoch_ms(now))

    def proposals(self, project: str, status: str | None) -> list[dict[str, Any]]:
        """Proposals of a project, newest first."""
        rows = self._all("SELECT doc FROM mg_proposals WHERE project_id = ? AND "
                         "(? IS NULL OR status = ?) ORDER BY seq DESC", (project, status, status))
        return [dict(_load(r[0])) for r in rows]

    def reviews(self, proposal_id: str) -> list[dict[str, Any]]:
        """Reviews of a proposal, oldest first."""
        rows = self._all("SELECT doc FROM mg_reviews WHERE proposal_id = ? ORDER BY seq",
                         (proposal_id,))
        return [dict(_load(r[0])) for r in rows]

    def conflicts(self, project: str, status: str | None, limit: int) -> list[dict[str, Any]]:
        """Persisted conflicts, newest first."""
        rows = self._all("SELECT doc FROM mg_conflicts WHERE project_id = ? AND "
                         "(? IS NULL OR status = ?) ORDER BY seq DESC LIMIT ?",
                         (project, status, status, limit))
        return [dict(_load(r[0])) for r in rows]

    def manifest(self, manifest_id: str) -> dict[str, Any] | None:
        """A stored manifest."""
        row = self._one("SELECT doc FROM mg_manifests WHERE manifest_id = ?", (manifest_id,))
        return dict(_load(row[0])) if row else None

    def advances(self, project: str, ref_name: str) -> list[dict[str, Any]]:
        """The protected-ref advance ledger, oldest first."""
        rows = self._all("SELECT doc FROM mg_advances WHERE project_id = ? AND ref_name = ? "
                         "ORDER BY seq", (project, ref_name))
        return [dict(_load(r[0])) for r in rows]

    def nonce_consumed(self, nonce: str) -> bool:
        """Whether a merge nonce has been used."""
        return self._one("SELECT 1 FROM mg_nonces WHERE nonce = ?", (nonce,)) is not None

    # --- writes ---------------------------------------------------------------------------
    def create_ref(self, project: str, name: str, head: str | None, *, protected: bool,
                   created_by: str, now: str) -> dict[str, Any]:
        """Create a ref; an existing name is a conflict.

        Raises:
            Conflict: the ref exists.
        """
        with self._tx() as db:
            if not db.execute("INSERT OR IGNORE INTO refs VALUES (?, ?, ?, ?, ?, ?, ?)",
                              (project, name, head, int(protected), created_by, now,
                               now)).rowcount:
                raise Conflict(f"ref {name} already exists", code="ref-exists")
        return self.ref(project, name) or {}

    def commit(self, cs: Changeset, *, request_digest: str | None, advance: bool,
               expected_head: str | None, create_ref: tuple[bool, str] | None,
               now: str) -> None:
        """Store a changeset and, when ``advance``, move its ref by CAS — atomically.

        ``cs`` is sealed (its id is its digest). ``create_ref`` = ``(protected, created_by)``
        creates the ref when it is missing.

        Raises:
            Conflict: ``cas_mismatch`` when the ref moved; ``idempotency_race`` when a
                concurrent request stored the same key first.
            NotFound: the ref is missing and may not be created.
        """
        project, name = cs.memory_id, cs.ref_name
        with self._tx() as db:
            self.store.lock_memory(project)
            row = db.execute("SELECT head FROM refs WHERE memory_id = ? AND name = ?",
                             (project, name)).fetchone()
            if advance:
                if row is None and create_ref is None:
                    raise NotFound(f"ref {name} does not exist", code="ref-not-found")
                current = row[0] if row else None
                if current != expected_head:
                    raise _cas(name, expected_head, current)
            if request_digest is not None:
                self._claim(cs.author, project, changeset_key(cs.idempotency_key),
                            request_digest, cs.id, now)
            self.store.insert_changeset(cs)
            if advance:
                if row is None and create_ref is not None:
                    made = db.execute("INSERT OR IGNORE INTO refs VALUES (?, ?, ?, ?, ?, ?, ?)",
                                      (project, name, cs.id, int(create_ref[0]), create_ref[1],
                                       now, now)).rowcount
                else:
                    # compare-and-swap in the statement: another process may have moved it
                    made = db.execute("UPDATE refs SET head = ?, updated_at = ? WHERE "
                                      "memory_id = ? AND name = ? AND head IS ?",
                                      (cs.id, now, project, name, expected_head)).rowcount
                if not made:
                    raise _cas(name, expected_head, self._head(db, project, name))

    def advance(self, project: str, name: str, expected: str | None, new: str,
                now: str) -> None:
        """CAS-advance an unprotected ref (protection is checked by the service).

        Raises:
            Conflict: the ref moved.
        """
        with self._tx() as db:
            self.store.lock_memory(project)
            row = db.execute("SELECT head FROM refs WHERE memory_id = ? AND name = ?",
                             (project, name)).fetchone()
            if row is None:
                raise NotFound(f"ref {name} does not exist", code="ref-not-found")
            if row[0] != expected:
                raise _cas(name, expected, row[0])
            if not db.execute("UPDATE refs SET head = ?, updated_at = ? WHERE memory_id = ? AND "
                              "name = ? AND head IS ?", (new, now, project, name,
                                                         expected)).rowcount:
                raise _cas(name, expected, self._head(db, project, name))

    @staticmethod
    def _head(db: Connection, project: str, name: str) -> str | None:
        row = db.execute("SELECT head FROM refs WHERE memory_id = ? AND name = ?",
                         (project, name)).fetchone()
        return row[0] if row else None

    def advance_protected(self, *, project: str, ref_name: str, expected: str, new: str,
                          nonce: str, advance: dict[str, Any], proposal: dict[str, Any],
                          now: str) -> None:
        """Consume the nonce, CAS the protected ref, record the advance, close the proposal.

        All or nothing: a CAS miss rolls the nonce back (the loser keeps nothing consumed);
        a nonce already consumed is refused whatever the ref holds.

        Raises:
            Conflict: ``authorization_replay`` for a used nonce, ``cas_mismatch`` for a moved
                ref.
        """
        with self._tx() as db:
            self.store.lock_memory(project)
            row = db.execute("SELECT head, protected FROM refs WHERE memory_id = ? AND "
                             "name = ?", (project, ref_name)).fetchone()
            if row is None or not row[1]:
                raise NotFound(f"protected ref {ref_name} does not exist",
                               code="ref-not-found")
            # the unique nonce decides, in this transaction (a second use inserts nothing)
            if not db.execute("INSERT OR IGNORE INTO mg_nonces VALUES (?, ?, ?, ?)",
                              (nonce, project, ref_name, now)).rowcount:
                raise Conflict("this merge authorization was already used",
                               code="authorization_replay",
                               hint="ask for a new merge authorization")
            if row[0] != expected:
                raise _cas(ref_name, expected, row[0])
            if not db.execute("UPDATE refs SET head = ?, updated_at = ? WHERE memory_id = ? AND "
                              "name = ? AND head IS ?", (new, now, project, ref_name,
                                                         expected)).rowcount:
                raise _cas(ref_name, expected, self._head(db, project, ref_name))
            db.execute("INSERT INTO mg_advances VALUES (?, ?, ?, ?, ?)",
                       (advance["advance_id"], project, ref_name, _dump(advance),
                        self._next(db)))
            db.execute("UPDATE mg_proposals SET status = ?, doc = ? WHERE proposal_id = ?",
                       (proposal["status"], _dump(proposal), proposal["proposal_id"]))

    def put_proposal(self, doc: dict[str, Any], *, key: str | None,
                     request_digest: str | None, conflicts: list[dict[str, Any]]) -> None:
        """Insert or update a proposal (with its conflicts on first insert)."""
        with self._tx() as db:
            exists = db.execute("SELECT 1 FROM mg_proposals WHERE proposal_id = ?",
                                (doc["proposal_id"],)).fetchone()
            if exists:
                db.execute("UPDATE mg_proposals SET status = ?, doc = ? WHERE proposal_id = ?",
                           (doc["status"], _dump(doc), doc["proposal_id"]))
                return
            if key is not None and request_digest is not None:
                self._claim(doc["originator_principal"], doc["project_id"], proposal_key(key),
                            request_digest, doc["proposal_id"], doc["created_at"])
            db.execute("INSERT INTO mg_proposals VALUES (?, ?, ?, ?, ?, ?)",
                       (doc["proposal_id"], doc["project_id"], doc["originator_principal"],
                        doc["status"], _dump(doc), self._next(db)))
            for c in conflicts:
                db.execute("INSERT OR IGNORE INTO mg_conflicts VALUES (?, ?, ?, ?, ?, ?)",
                           (c["conflict_id"], doc["proposal_id"], doc["project_id"],
                            c["status"], _dump(c), self._next(db)))

    def put_review(self, review: dict[str, Any], proposal: dict[str, Any],
                   expected_status: str) -> None:
        """Store a review and the proposal's new state, if the proposal did not change.

        Raises:
            Conflict: the proposal changed status concurrently.
        """
        with self._tx() as db:
            row = db.execute("SELECT status FROM mg_proposals WHERE proposal_id = ?",
                             (proposal["proposal_id"],)).fetchone()
            if row is None or row[0] != expected_status:
                raise Conflict("the proposal changed while you reviewed it",
                               code="proposal-changed", hint="re-read it and review again")
            db.execute("INSERT INTO mg_reviews VALUES (?, ?, ?, ?)",
                       (review["review_id"], review["proposal_id"], _dump(review),
                        self._next(db)))
            db.execute("UPDATE mg_proposals SET status = ?, doc = ? WHERE proposal_id = ?",
                       (proposal["status"], _dump(proposal), proposal["proposal_id"]))

    def add_conflicts(self, project: str, proposal_id: str,
                      rows: list[dict[str, Any]]) -> None:
        """Persist conflicts for a proposal (an id already stored for it is kept as is)."""
        with self._tx() as db:
            for c in rows:
                db.execute("INSERT OR IGNORE INTO mg_conflicts VALUES (?, ?, ?, ?, ?, ?)",
                           (c["conflict_id"], proposal_id, project, c["status"], _dump(c),
                            self._next(db)))

    def set_conflict_status(self, project: str, conflict_id: str, *, proposal_id: str | None,
                            status: str, note: str | None, now: str) -> int:
        """Resolve or retire persisted conflicts; returns how many rows changed."""
        with self._tx() as db:
            rows = db.execute("SELECT proposal_id, doc FROM mg_conflicts WHERE project_id = ? "
                              "AND (? = '' OR conflict_id = ?) AND (? IS NULL OR proposal_id = ?)"
                              " AND status = 'open'",
                              (project, conflict_id, conflict_id, proposal_id,
                               proposal_id)).fetchall()
            for pid, text in rows:
                doc = dict(_load(text))
                doc.update({"status": status, "resolved_at": now})
                if note is not None:
                    doc["resolution_note"] = note
                db.execute("UPDATE mg_conflicts SET status = ?, doc = ? WHERE conflict_id = ? "
                           "AND proposal_id = ?", (status, _dump(doc), doc["conflict_id"], pid))
            return len(rows)

    def put_manifest(self, doc: dict[str, Any]) -> None:
        """Store a context manifest (immutable)."""
        with self._tx() as db:
            db.execute("INSERT INTO mg_manifests VALUES (?, ?, ?)",
                       (doc["manifest_id"], doc["project_id"], _dump(doc)))

    def settings(self, project: str) -> dict[str, Any]:
        """Per-project Memory Git settings (``{}`` when never set).

        One autocommit statement under the store lock (no transaction of its own): it runs on
        every UHP write, to decide whether the write goes through review.
        """
        with self.store.lock:
            row = self._db.execute("SELECT doc FROM mg_settings WHERE project_id = ?",
                                   (project,)).fetchone()
        return dict(_load(row[0])) if row else {}

    def put_settings(self, project: str, doc: dict[str, Any]) -> None:
        """Replace the settings of a project."""
        with self._tx() as db:
            db.execute("INSERT INTO mg_settings VALUES (?, ?) ON CONFLICT (project_id) "
                       "DO UPDATE SET doc = excluded.doc", (project, _dump(doc)))

    def replay(self, principal: str, scope: str, key: str) -> tuple[str, Any] | None:
        """``(request digest, stored response)`` of a write made under a header key."""
        with self.store.read():
            return self.store.replay(principal, scope, key)

    def remember_response(self, principal: str, scope: str, key: str, *, digest: str,
                          response: Any, now_ms: int) -> None:
        """Keep the response of a first write under its key (same table as UHP writes)."""
        with self._tx():
            self.store.remember_response(principal, scope, key, digest, response, now_ms)

    def _unsafe_set_head(self, project: str, name: str, head: str | None) -> None:
        """Test-only: force a ref (e.g. cycle it back) without any check. Never call in code."""
        with self._tx() as db:
            db.execute("UPDATE refs SET head = ? WHERE memory_id = ? AND name = ?",
                       (head, project, name))


def _epoch_ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def _cas(name: str, expected: str | None, current: str | None) -> Conflict:
    return Conflict(f"{name} moved: expected head {expected or 'none'}, current head "
                    f"{current or 'none'}", code="cas_mismatch",
                    hint="re-read the ref, reconcile, and resubmit with a new idempotency key")


def _ref(row: Any) -> dict[str, Any]:
    return {"project_id": row[0], "ref_name": row[1], "head_changeset_id": row[2],
            "protected": bool(row[3]), "created_at": row[4], "updated_at": row[5],
            "created_by_principal": row[6]}


__all__ = ["REVIEW_SCHEMA", "GitStore", "Host"]
