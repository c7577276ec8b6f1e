"""Rows of the server-owned principals: members, groups, memberships, hashed credentials, and
the review desk's sessions (each opened with a credential; kept by the hash of its id).

A base of :class:`~palimpsest.service.storage.sqlite.SqliteStore`, split out so that module
keeps to the tree, history and projections. It runs statements on the store's connection and
never opens a transaction itself: callers hold :meth:`SqliteStore.write` or ``read``.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from palimpsest.errors import Conflict
from palimpsest.identity import b64_nopad, b64_nopad_decode
from palimpsest.service.model import Credential, Group, Member, MemberKey, Session
from palimpsest.service.storage.schema import Statements, member_of


class PrincipalRows(Statements):
    """Statement helpers over ``_db`` and the principal tables."""

    _db_path: Path
    _peek: sqlite3.Connection | None
    _peek_lock: threading.Lock

    # --- the principals generation ---------------------------------------------------------
    def principals_generation(self) -> int:
        """Bumped (by triggers) on every change of members, groups, memberships or
        credentials, whichever process made it."""
        row = self._one("SELECT value FROM meta WHERE key='principals_gen'")
        return int(row["value"]) if row else 0

    def peek_principals_generation(self) -> int | None:
        """:meth:`principals_generation` read without the store lock, on a second, read-only
        connection that never waits (WAL readers do not wait for the writer): safe to call
        from an event loop while the service thread writes. ``None`` when the read did not
        succeed at once; the caller then takes the ordinary path."""
        with self._peek_lock:
            try:
                if self._peek is None:
                    self._peek = sqlite3.connect(
                        f"{self._db_path.absolute().as_uri()}?mode=ro",
                        uri=True,
                        isolation_level=None, check_same_thread=False, timeout=0)
                # fetchall steps the statement to its end, so no read snapshot stays open.
                rows = self._peek.execute(
                    "SELECT value FROM meta WHERE key='principals_gen'").fetchall()
            except sqlite3.Error:
                return None
        return int(rows[0][0]) if rows else None

    # --- members, groups, credentials -----------------------------------------------------
    def insert_member(self, m: Member) -> None:
        """Add a member."""
        self._x("INSERT INTO members VALUES (?,?,?,?,?)",
                (m.id, m.name, m.type, int(m.admin), m.created_at))

    def members(self) -> list[Member]:
        """All members, oldest first."""
        return [member_of(r) for r in self._q("SELECT * FROM members ORDER BY created_at, id")]

    def member(self, member_id: str) -> Member | None:
        """One member or ``None``."""
        row = self._one("SELECT * FROM members WHERE id=?", (member_id,))
        return member_of(row) if row else None

    def insert_group(self, g: Group) -> None:
        """Add a group."""
        self._x("INSERT INTO groups VALUES (?,?,?)", (g.id, g.name, g.created_at))

    def group(self, group_id: str) -> Group | None:
        """One group with its members."""
        row = self._one("SELECT * FROM groups WHERE id=?", (group_id,))
        if row is None:
            return None
        ids = tuple(r["member_id"] for r in self._q(
            "SELECT member_id FROM memberships WHERE group_id=? ORDER BY member_id",
            (group_id,)))
        return Group(row["id"], row["name"], row["created_at"], ids)

    def groups(self) -> list[Group]:
        """Every group."""
        out = []
        for r in self._q("SELECT id FROM groups ORDER BY created_at, id"):
            g = self.group(r["id"])
            if g is not None:
                out.append(g)
        return out

    def set_membership(self, group_id: str, member_id: str, present: bool) -> None:
        """Add or remove a membership (idempotent)."""
        if present:
            self._x("INSERT OR IGNORE INTO memberships VALUES (?,?)", (group_id, member_id))
        else:
            self._x("DELETE FROM memberships WHERE group_id=? AND member_id=?",
                    (group_id, member_id))

    def groups_of(self, member_id: str) -> frozenset[str]:
        """Group ids a member belongs to."""
        return frozenset(r["group_id"] for r in self._q(
            "SELECT group_id FROM memberships WHERE member_id=?", (member_id,)))

    def insert_credential(self, c: Credential, secret_hash: str) -> None:
        """Store a credential by the hash of its secret."""
        self._x("INSERT INTO credentials VALUES (?,?,?,?,?,?)",
                (c.id, c.member_id, secret_hash, c.label, c.created_at, int(c.revoked)))

    def credentials(self, member_id: str | None) -> list[Credential]:
        """Credentials, optionally of one member."""
        rows = self._q("SELECT * FROM credentials WHERE (? IS NULL OR member_id=?) "
                       "ORDER BY created_at, id", (member_id, member_id))
        return [Credential(r["id"], r["member_id"], r["created_at"], bool(r["revoked"]),
                           r["label"]) for r in rows]

    def credential_hash(self, credential_id: str) -> tuple[str, str, bool] | None:
        """``(member_id, secret_hash, revoked)`` of a credential."""
        r = self._one("SELECT * FROM credentials WHERE id=?", (credential_id,))
        return (r["member_id"], r["secret_hash"], bool(r["revoked"])) if r else None

    def revoke(self, credential_id: str) -> bool:
        """Revoke; False when unknown."""
        return self._x("UPDATE credentials SET revoked=1 WHERE id=?", (credential_id,)) > 0

    # --- members' public keys --------------------------------------------------------------
    def insert_member_key(self, k: MemberKey) -> None:
        """Register a member's public key (checked by the caller). A key is one member's:
        registering it again, for anyone, is a conflict."""
        raw = b64_nopad_decode(k.public_key, 32, "public key")
        if self._one("SELECT 1 FROM member_keys WHERE key=?", (raw,)) is not None:
            raise Conflict("this public key is registered already", code="key_registered",
                           hint="list your keys; a key is registered once")
        self._x("INSERT INTO member_keys VALUES (?,?,?,0)", (raw, k.member_id, k.created_at))

    def member_keys(self, member_id: str) -> list[MemberKey]:
        """A member's registered keys, oldest first (revoked ones included)."""
        return [MemberKey(r["member_id"], b64_nopad(bytes(r["key"])), r["created_at"],
                          bool(r["revoked"]))
                for r in self._q("SELECT key, member_id, created_at, revoked FROM member_keys "
                                 "WHERE member_id=? ORDER BY created_at, key", (member_id,))]

    def revoke_member_key(self, member_id: str, public_key: str) -> bool:
        """Stop a key from signing new changesets (signatures it made stay); False when the
        member has no such key."""
        raw = b64_nopad_decode(public_key, 32, "public key")
        return self._x("UPDATE member_keys SET revoked=1 WHERE key=? AND member_id=?",
                       (raw, member_id)) > 0

    # --- review-desk sessions (not principals: no principals generation bump) --------------
    def insert_session(self, s: Session) -> None:
        """Store a new session."""
        self._x("INSERT INTO sessions VALUES (?,?,?,?,?,?,?)",
                (s.key, s.member_id, s.credential_id, s.csrf, s.created_at, s.idle_until,
                 s.expires_at))

    def session(self, key: str) -> Session | None:
        """The session stored under ``key`` (the SHA-256 of its id), ended or not."""
        r = self._one("SELECT * FROM sessions WHERE key=?", (key,))
        return Session(r["key"], r["member_id"], r["credential_id"], r["csrf"],
                       r["created_at"], r["idle_until"], r["expires_at"]) if r else None

    def touch_session(self, key: str, idle_until: int) -> bool:
        """Move a stored session's idle deadline; False when it is gone (never recreates it)."""
        return self._x("UPDATE sessions SET idle_until=? WHERE key=?", (idle_until, key)) > 0

    def delete_session(self, key: str) -> None:
        """Forget one session; an unknown key is ignored."""
        self._x("DELETE FROM sessions WHERE key=?", (key,))

    def purge_sessions(self, now: int, member_id: str, keep: int) -> None:
        """Forget every session that ended by ``now`` and all but the newest ``keep`` live
        sessions of ``member_id``."""
        self._x("DELETE FROM sessions WHERE idle_until<=? OR expires_at<=?", (now, now))
        self._x("DELETE FROM sessions WHERE key IN (SELECT key FROM sessions WHERE member_id=? "
                "ORDER BY created_at DESC, key LIMIT -1 OFFSET ?)", (member_id, keep))
