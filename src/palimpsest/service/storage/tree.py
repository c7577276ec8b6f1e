"""The statements both stores run alike: the tree and grants, refs, idempotent responses, the
meta generations and the rows a migration carries over.

A base of :class:`~palimpsest.service.storage.sqlite.SqliteStore` and of the PostgreSQL store
(:mod:`.postgres`), over the members, files and records of :mod:`.principals`, :mod:`.files`
and :mod:`.records`. The SQL here is the common ground of both databases (``?`` placeholders,
``INSERT OR IGNORE`` and ``IS ?`` as :mod:`.postgres.dialect` turns them for a server); what only
one database can say lives in that store's own class.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Final

from palimpsest import canonical
from palimpsest.errors import Conflict, Unavailable
from palimpsest.service.model import CAS_MISMATCH, MEMORY_UNAVAILABLE, Grant, Memory, Ref
from palimpsest.service.storage.audit import AuditRows
from palimpsest.service.storage.changesets import digest_key
from palimpsest.service.storage.files import FileRows
from palimpsest.service.storage.memorygit import GitStore
from palimpsest.service.storage.principals import PrincipalRows
from palimpsest.service.storage.records import RecordRows
from palimpsest.service.storage.schema import grant_of, load, memory_of, priv_text


class StoreVersionError(Unavailable):
    """The store holds a schema this version does not read (older: migrate it; newer: run
    the version that wrote it)."""

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message, code=MEMORY_UNAVAILABLE, hint=hint)


class SqlRows(PrincipalRows, FileRows, RecordRows, AuditRows):
    """Row helpers shared by every SQL store (see the module docs)."""

    _review: GitStore | None

    def _init_state(self, write_wait: float) -> None:
        """The process-local state every SQL store keeps beside its connection."""
        self.lock = threading.RLock()
        self._write_wait = write_wait
        self._in_tx = False
        self._keys, self._names, self._pending = {}, {}, {}  # see schema.Names
        self._writers = {}
        self._seqs, self._new_seqs = {}, {}  # see changesets.ChangesetRows
        self._review = None
        self._signer = None  # see changesets.ChangesetRows.set_signer

    # --- meta -----------------------------------------------------------------------------
    def tree_generation(self) -> int:
        """Bumped on every change of the tree or grants (caches key on it)."""
        row = self._one("SELECT value FROM meta WHERE key='tree_gen'")
        return int(row["value"]) if row else 0

    def bump_tree(self) -> None:
        """Invalidate tree caches (inside a write)."""
        self._x("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='tree_gen'")

    # --- tree and grants ------------------------------------------------------------------
    def all_memories(self) -> list[Memory]:
        """Every memory (the tree is small next to the records)."""
        return [memory_of(r) for r in self._q("SELECT * FROM memories")]

    def all_grants(self) -> list[Grant]:
        """Every explicit grant."""
        return [grant_of(r) for r in self._q("SELECT * FROM grants")]

    def insert_memory(self, m: Memory) -> None:
        """Add a node (with its integer key: a reach names memories that hold no record yet,
        and a read must find every one of them among the keys it keeps)."""
        self._x("INSERT INTO memories VALUES (?,?,?,?,?,?,?,?,?)",
                (m.id, m.name, m.description, m.parent_id, int(m.restricted), m.provider,
                 m.created_by, m.created_at, m.updated_at))
        self._key(m.id)
        self.bump_tree()

    def update_memory(self, m: Memory) -> None:
        """Replace a node's client fields."""
        self._x("UPDATE memories SET name=?, description=?, parent_id=?, restricted=?, "
                "updated_at=? WHERE id=?",
                (m.name, m.description, m.parent_id, int(m.restricted), m.updated_at, m.id))
        self.bump_tree()

    def delete_memories(self, ids: Sequence[str]) -> None:
        """Remove nodes with everything they hold: grants, history (on every ref), bodies,
        file bytes, projections, docs. A body another memory's record also holds (the same
        words written there) stays that record's."""
        files: set[str] = set()
        for mid in ids:
            mem = self._known(mid)
            rows = self._q("SELECT n, body FROM records WHERE mem=?", (mem,)) if mem else []
            ns = [r["n"] for r in rows]
            digests = self.changeset_digests(mid)  # bodies of unmerged refs too
            digests.update(_hex(r["body"]) for r in rows)
            for n in ns:
                digests.update(_hex(r["body"]) for r in self._q(
                    "SELECT body FROM versions WHERE n=?", (n,)))
                self._x("DELETE FROM record_fts WHERE rowid=?", (n,))
                self._x("DELETE FROM versions WHERE n=?", (n,))
            self._x("DELETE FROM records WHERE mem=?", (mem,))
            for d in sorted(digests):
                key = digest_key(d)
                if key is not None and self._one(
                        "SELECT 1 FROM records WHERE body=? UNION ALL SELECT 1 FROM versions "
                        "WHERE body=? LIMIT 1", (key, key)) is not None:
                    continue
                found = self.body(d)
                if found is not None:
                    content = load(found)
                    parts = content.get("content", ()) if isinstance(content, dict) else ()
                    files.update(p["file"]["id"] for p in parts if isinstance(p, dict)
                                 and p.get("type") == "file" and isinstance(p.get("file"), dict))
                self._drop_body(d)
            self._x("DELETE FROM signatures WHERE cs IN (SELECT seq FROM changesets "
                    "WHERE mem=?)", (mem,))
            self._x("DELETE FROM changesets WHERE mem=?", (mem,))
            self._x("DELETE FROM idempotency WHERE scope=?", (mem,))
            for table in ("refs", "grants", "edges", "memory_counts", "docs"):
                self._x(f"DELETE FROM {table} WHERE memory_id=?", (mid,))  # noqa: S608
            self._x("DELETE FROM memories WHERE id=?", (mid,))
        for fid in files:
            self.delete_file(fid)
        self.bump_tree()

    def record_counts(self, ids: Sequence[str]) -> dict[str, int]:
        """Active record counts per memory (kept by the projection, not counted per read)."""
        out = dict.fromkeys(ids, 0)
        if ids:
            marks = ",".join("?" * len(ids))
            for r in self._q(f"SELECT memory_id, active FROM memory_counts "  # noqa: S608
                             f"WHERE memory_id IN ({marks})", tuple(ids)):
                out[r["memory_id"]] = int(r["active"])
        return out

    def upsert_grant(self, g: Grant) -> Grant:
        """One grant per principal per node: a second replaces the first (keeping its id)."""
        row = self._one("SELECT id, created_at FROM grants WHERE memory_id=? AND principal=?",
                        (g.memory_id, g.principal))
        if row is not None:
            self._x("UPDATE grants SET privileges=? WHERE id=?",
                    (priv_text(g.privileges), row["id"]))
            g = Grant(row["id"], g.memory_id, g.principal, g.privileges, row["created_at"])
        else:
            self._x("INSERT INTO grants VALUES (?,?,?,?,?)",
                    (g.id, g.memory_id, g.principal, priv_text(g.privileges), g.created_at))
        self.bump_tree()
        return g

    def delete_grant(self, memory_id: str, grant_id: str) -> bool:
        """Remove one grant; False when the node has no such grant."""
        n = self._x("DELETE FROM grants WHERE id=? AND memory_id=?", (grant_id, memory_id))
        self.bump_tree()
        return n > 0

    # --- history --------------------------------------------------------------------------
    def ref(self, memory_id: str, name: str) -> Ref | None:
        """One ref or ``None``."""
        r = self._one("SELECT * FROM refs WHERE memory_id=? AND name=?", (memory_id, name))
        return Ref(r["memory_id"], r["name"], r["head"], bool(r["protected"]), r["created_by"],
                   r["created_at"], r["updated_at"]) if r else None

    def refs(self, memory_id: str) -> list[Ref]:
        """Refs of a memory by name."""
        out = []
        for r in self._q("SELECT name FROM refs WHERE memory_id=? ORDER BY name", (memory_id,)):
            ref = self.ref(memory_id, r["name"])
            if ref is not None:
                out.append(ref)
        return out

    def advance_ref(self, ref: Ref, *, expected: str | None) -> None:
        """Compare-and-swap: point ``ref.name`` at ``ref.head`` only while it still holds
        ``expected`` (``None``: the ref is new or has no head yet), else cas_mismatch and
        nothing moves. The ref is created when it does not exist and nothing was expected."""
        moved = self._x("UPDATE refs SET head=?, updated_at=? WHERE memory_id=? AND name=? AND "
                        "head IS ?", (ref.head, ref.updated_at, ref.memory_id, ref.name,
                                      expected))
        if moved:
            return
        # a first head: the unique (memory, name) decides between two creators
        if expected is None and self._x(
                "INSERT OR IGNORE INTO refs VALUES (?,?,?,?,?,?,?)",
                (ref.memory_id, ref.name, ref.head, int(ref.protected), ref.created_by,
                 ref.created_at, ref.updated_at)):
            return
        current = self.ref(ref.memory_id, ref.name)
        held = current.head if current is not None else None
        raise Conflict(f"{ref.name} moved: expected head {expected or 'none'}, current head "
                       f"{held or 'none'}", code=CAS_MISMATCH,
                       hint="re-read the ref and resubmit with a new idempotency key")

    def replay(self, principal: str, scope: str, key: str) -> tuple[str, Any] | None:
        """``(request digest, stored response)`` for a used key."""
        who, where = self._known(principal), self._known(scope)
        if who is None or where is None:
            return None
        r = self._one("SELECT digest, response FROM idempotency WHERE scope=? AND principal=? "
                      "AND key=?", (where, who, key))
        return (_digest_text(r["digest"]), load(r["response"])) if r else None

    def forget_responses(self, record_id: str) -> None:
        """Drop stored idempotent responses that name an erased record, whatever the route
        (a UHP write, a Memory Git commit or merge): they may carry its content."""
        self._x("DELETE FROM idempotency WHERE instr(response, ?) > 0", (record_id.encode(),))

    # --- migration (pal admin migrate) ---------------------------------------------------------
    _IMPORTABLE: Final = frozenset({"members", "groups", "memberships", "credentials",
                                    "memories", "grants", "files", "mg_nonces", "mg_settings",
                                    "docs", "mg_reviews", "mg_advances", "mg_manifests",
                                    "mg_conflicts", "sessions"})

    def import_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
                    ) -> None:
        """Carry rows of an older store over as they are (migration only)."""
        if table not in self._IMPORTABLE or not all(c.isidentifier() for c in columns):
            raise ValueError(f"not an importable table: {table}")
        if not rows:
            return
        sql = (f"INSERT INTO {table} ({', '.join(columns)}) "  # noqa: S608 — allowlisted
               f"VALUES ({', '.join('?' * len(columns))})")
        self._db.executemany(sql, [tuple(r) for r in rows])
        if table == "memories":
            for r in self._q("SELECT id FROM memories"):
                self._key(r["id"])

    def import_document(self, table: str, columns: Sequence[str], values: Sequence[Any],
                        doc: Any) -> None:
        """One JSON document row of an older store, its document rewritten (migration only)."""
        text = canonical.encode(doc) if table == "docs" else canonical.encode(doc).decode()
        self.import_rows(table, [*columns, "doc"], [[*values, text]])

    def import_ref(self, ref: Ref) -> None:
        """A ref of an older store, its head already rewritten (migration only)."""
        self._x("INSERT INTO refs VALUES (?,?,?,?,?,?,?)",
                (ref.memory_id, ref.name, ref.head, int(ref.protected), ref.created_by,
                 ref.created_at, ref.updated_at))

    def counts(self) -> dict[str, int]:
        """Row counts reported by a rebuild (``versions``: every version, current or not)."""
        out = {}
        for table in ("changesets", "records", "versions", "record_fts"):
            r = self._one(f"SELECT COUNT(*) AS c FROM {table}")  # noqa: S608
            out[table] = int(r["c"]) if r else 0
        out["versions"] += out["records"]
        out["indexed"] = out.pop("record_fts")
        return out


def _hex(value: Any) -> str:
    return bytes(value).hex() if isinstance(value, bytes) else str(value)


def _digest_text(value: Any) -> str:
    """A request digest as stored (32 bytes, or the empty name a migration keeps)."""
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    return raw.hex() if len(raw) == 32 else raw.decode("utf-8", "replace")


__all__ = ["SqlRows"]
