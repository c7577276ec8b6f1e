"""Copying an embedded store's rows into an empty PostgreSQL store (``pal admin migrate --to``).

What is history or was said by someone is copied; what is derived is not (the caller
re-derives the projections and the search index from the changesets and proves them equal):

- rows with no integer key inside are copied column for column — members, groups,
  memberships, credentials, members' keys, sessions, memories, grants, refs, files, documents,
  Memory Git's review tables, and the bodies (their stored form is the same on both stores:
  :mod:`..pack`, deltas named by digest);
- changesets go through the stores' own reading and writing (a stored changeset names its
  parents by row and its principals by ``names`` key, which the target makes anew), with
  every signature they carry;
- idempotent responses are copied with their principal and scope keys renamed.

Everything is written in the caller's transaction on the target: a failure leaves it empty.
"""

from __future__ import annotations

from typing import Any, Final

from palimpsest.errors import Conflict
from palimpsest.service.storage.postgres.store import PostgresStore
from palimpsest.service.storage.sqlite import SqliteStore

# Copied as they are, in this order (``docs`` in the order it was written: listings use it).
PLAIN: Final = (
    ("members", ""), ("groups", ""), ("memberships", ""), ("credentials", ""),
    ("member_keys", ""), ("sessions", ""), ("memories", ""), ("grants", ""), ("refs", ""),
    ("files", ""), ("docs", " ORDER BY rowid"), ("bodies", ""), ("mg_proposals", ""),
    ("mg_reviews", ""), ("mg_nonces", ""), ("mg_advances", ""), ("mg_manifests", ""),
    ("mg_conflicts", ""), ("mg_settings", ""))
BATCH: Final = 500


def holds_anything(target: PostgresStore) -> bool:
    """Whether the target database holds any member, memory, changeset or name."""
    return target._one("SELECT 1 FROM members UNION ALL SELECT 1 FROM memories UNION ALL "
                       "SELECT 1 FROM changesets UNION ALL SELECT 1 FROM names LIMIT 1"
                       ) is not None


def copy_rows(source: SqliteStore, target: PostgresStore) -> dict[str, int]:
    """Copy the source's history and said rows into the target (inside ``target.write()``
    and ``source.read()``); returns rows copied per table.

    Raises:
        Conflict: the target is not empty (``target_not_empty``): nothing is touched.
    """
    if holds_anything(target):
        raise Conflict("the target database already holds a store", code="target_not_empty",
                       hint="migrate into a new, empty database (createdb NAME), never over "
                       "another store")
    held = {r[0] for r in source._q("SELECT name FROM sqlite_master WHERE type='table'")}
    counts: dict[str, int] = {}
    for table, order in PLAIN:
        if table not in held:
            continue
        cur = source._db.execute(f"SELECT * FROM {table}{order}")  # noqa: S608 — fixed names
        columns = [d[0] for d in cur.description]
        rows = [tuple(r) for r in cur.fetchall()]
        sql = (f"INSERT INTO {table} ({', '.join(columns)}) "  # noqa: S608 — fixed names
               f"VALUES ({', '.join('?' * len(columns))})")
        for at in range(0, len(rows), BATCH):
            target._db.executemany(sql, rows[at:at + BATCH])
        counts[table] = len(rows)
    if "mg_seq" in held:
        row = source._one("SELECT value FROM mg_seq WHERE id = 1")
        target._x("UPDATE mg_seq SET value = ? WHERE id = 1", (int(row[0]) if row else 0,))
    counts["changesets"] = counts["signatures"] = 0
    target.set_signer(None)  # the signatures are the source's own, copied below
    batch: list[str] = []
    for cs in source.changesets():
        target.insert_changeset(cs)
        counts["changesets"] += 1
        batch.append(cs.id)
        if len(batch) == BATCH:
            counts["signatures"] += _signatures(source, target, batch)
            batch = []
    counts["signatures"] += _signatures(source, target, batch)
    counts["idempotency"] = 0
    for r in source._q("SELECT scope, principal, key, digest, response, created_at "
                       "FROM idempotency"):
        target._x("INSERT INTO idempotency VALUES (?,?,?,?,?,?)",
                  (target._key(source._name(r[0])), target._key(source._name(r[1])), r[2],
                   bytes(r[3]), bytes(r[4]), r[5]))
        counts["idempotency"] += 1
    return counts


def _signatures(source: SqliteStore, target: PostgresStore, cids: list[str]) -> int:
    n = 0
    for cid, sigs in source.signatures(cids).items():
        for sig in sigs:
            target.add_signature(cid, sig)
            n += 1
    return n


def copy_store(source: Any, target: Any) -> dict[str, int]:
    """:func:`copy_rows` for stores seen as the protocol (the service's move)."""
    if not isinstance(source, SqliteStore) or not isinstance(target, PostgresStore):
        raise TypeError("migrate --to copies an embedded store into a PostgreSQL store")
    return copy_rows(source, target)


__all__ = ["copy_rows", "copy_store", "holds_anything"]
