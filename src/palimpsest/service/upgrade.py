"""``pal admin migrate``: convert a data directory written by an older store into the current
one (schema 3), keeping the original file beside it.

From schema 2 (one history, kept as plain JSON): every changeset, ref, body, payload and
stored response carries over unchanged (ids and digests stay), into the compact layout of
schema 3; the projections are derived again. From schema 1 (two models stitched together),
what changes, and why it is safe:

- every changeset is rewritten in append order (parents first) into the one changeset model:
  a record body is named by its plain content address (the old salted digest dropped), a
  Memory Git payload is kept apart from the changeset's canonical bytes; so every changeset id
  changes, and every place that named an old id (refs, parents, proposals, reviews, advances,
  manifests, conflicts, snapshots, stored responses) is rewritten with the new one, and a
  proposal's digest with it;
- members, groups, credentials, the tree, grants, files, review settings and consumed merge
  nonces carry over as they are;
- the projections (records, versions, search index) are then re-derived from the new history;
- idempotency keys stay taken: a replay of a UHP write finds its stored answer; a replay of a
  Memory Git request made before the migration fails closed (its old request digest is not
  kept), so nothing is ever written twice.

The old database stays as ``palimpsest.schema<N>.db`` in the data directory; nothing else of
the directory (file bytes, the merge key) is touched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from palimpsest.errors import Conflict, InvalidInput, Unavailable
from palimpsest.service import history
from palimpsest.service.core import Core
from palimpsest.service.memorygit.review import Proposal
from palimpsest.service.model import CHANGESET_EXTRA, Changeset, Op, Ref, Wire, unavailable
from palimpsest.service.storage import SCHEMA_VERSION, open_import_target, schema1, schema2
from palimpsest.service.storage.protocol import ImportTarget, changeset_key, proposal_key

WORK = "migrating"
_BODIED = ("add_record", "revise_record")


def _swap(value: Any, names: Mapping[str, str]) -> Any:
    """``value`` with every string that is an old id (or digest) replaced by the new one."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, list):
        return [_swap(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _swap(v, names) for k, v in value.items()}
    return value


def _convert(doc: Mapping[str, Any], old: schema1.Schema1, new: ImportTarget,
             names: Mapping[str, str]) -> Changeset:
    """One schema-1 changeset document in the one changeset model (its bodies stored)."""
    ops = []
    for o in doc["ops"]:
        payload = dict(o.get("payload") or {})
        if o["op_type"] in _BODIED:
            found = old.body(payload["body_digest"])
            if found is not None:  # an erased body keeps its old name: nothing to address
                data = found[1]
                payload["body_digest"] = hashlib.sha256(data).hexdigest()
                new.put_body(payload["body_digest"], data)
        ops.append(Op(o["op_type"], o.get("target_event_id"), payload,
                      o.get("resulting_event_id")))
    extra = {k: doc[k] for k in CHANGESET_EXTRA if doc.get(k)}
    return history.make_changeset(doc["project_id"], doc["ref_name"],
                                  [names.get(p, p) for p in doc["parent_ids"]],
                                  doc["author_principal"], doc["message"],
                                  doc["idempotency_key"], ops, doc["created_at"], extra)


def _proposal_digest(doc: Mapping[str, Any]) -> str:
    return Proposal(
        proposal_id=doc["proposal_id"], project_id=doc["project_id"], kind=doc["kind"],
        source_ref=doc["source_ref"], target_ref=doc["target_ref"],
        base_changeset_id=doc["base_changeset_id"], head_changeset_id=doc["head_changeset_id"],
        originator=doc["originator_principal"], message=doc["message"],
        selected_ops=tuple(doc["selected_ops"]), created_at=doc["created_at"]).digest()


def kept_name(schema: int) -> str:
    """Where the original database stays after a migration from ``schema``."""
    return f"palimpsest.schema{schema}.db"


def _copy2(old: schema2.Schema2, new: ImportTarget) -> int:
    """Everything of a schema-2 store into the new one, unchanged; returns changesets."""
    for table in schema2.PLAIN:
        names_of_columns, rows = old.rows(table)
        new.import_rows(table, names_of_columns, rows)
    count = 0
    for cs in old.history():
        history.verify(cs)  # a damaged old store is refused, never carried over silently
        new.insert_changeset(cs)
        for op in cs.ops:  # a UHP op's body (a merged record's is derived again)
            digest = (op.payload or {}).get("body_digest") if op.payload_digest is None else None
            data = old.stored(digest) if isinstance(digest, str) else None
            if data is not None and history.body_matches(str(digest), data):
                new.put_body(str(digest), data)
        count += 1
    for ref in old.refs():
        new.import_ref(ref)
    for doc, seq in old.proposals_with_seq():
        new.import_proposal(doc, seq)
    for principal, scope, key, digest, response, at in old.idempotency():
        new.remember_response(principal, scope, key, digest, response, at)
    return count


def _copy(old: schema1.Schema1, new: ImportTarget) -> int:
    """Everything of the old store into the new one, ids rewritten; returns changesets."""
    names: dict[str, str] = {}
    for table in schema1.PLAIN:
        names_of_columns, rows = old.rows(table)
        new.import_rows(table, names_of_columns, rows)
    count = 0
    for doc in old.changesets():
        cs = _convert(doc, old, new, names)
        new.insert_changeset(cs)
        names[doc["changeset_id"]] = cs.id
        count += 1
    for ref in old.refs():
        head = names.get(ref.head, ref.head) if ref.head else None
        new.import_ref(Ref(ref.memory_id, ref.name, head, ref.protected, ref.created_by,
                           ref.created_at, ref.updated_at))
    proposals = old.proposals()
    for doc, _, _ in proposals:  # a proposal's digest covers the heads it is pinned to
        names[doc["proposal_digest"]] = _proposal_digest(_swap(doc, names))
    for doc, key, seq in proposals:
        moved = _swap(doc, names)
        new.import_proposal(moved, seq)
        if key:
            new.remember_response(doc["originator_principal"], doc["project_id"],
                                  proposal_key(key), "", {"id": doc["proposal_id"]}, 0)
    for table, columns, column in schema1.DOCUMENTS:
        for values, document in old.documents(table, columns, column):
            new.import_document(table, columns, values, _swap(document, names))
    for principal, scope, key, digest, response, at in old.idempotency():
        new.remember_response(principal, scope, key, digest, _swap(response, names), at)
    for project, author, key, cid in old.changeset_keys():
        # the old request digest is not comparable: a replay fails closed, never writes twice
        new.remember_response(author, project, changeset_key(key), "",
                              {"id": names.get(cid, cid)}, 0)
    return count


def _schema_of(db_path: Path) -> int:
    """The schema an old database says it has (it is not changed)."""
    for reader in (schema1.Schema1, schema2.Schema2):
        try:
            reader(db_path).close()
        except Unavailable:
            continue
        return int(reader.SCHEMA)
    raise unavailable(f"{db_path} is not a store of schema 1 or 2; nothing to migrate "
                      f"(this version writes schema {SCHEMA_VERSION})")


def migrate(data_dir: Path) -> Wire:
    """Convert ``data_dir`` from schema 1 or 2 to the current one (see the module docs).

    Raises:
        InvalidInput: the directory holds no store at all.
        Conflict: a migration was already started here (its leftovers are named).
        Unavailable: the store there is not of an older schema (nothing is changed).
    """
    db_path = data_dir / "palimpsest.db"
    work = data_dir / WORK
    if not db_path.is_file():
        raise InvalidInput(f"there is no store in {data_dir}", code="no_store",
                           hint="name the data directory with pal admin --data-dir DIR migrate")
    started = [p for p in (*(data_dir / kept_name(n) for n in (1, 2)), work) if p.exists()]
    if started:
        kept = started[0] if started[0] != work else data_dir / kept_name(1)
        raise Conflict(f"{started[0].name} already exists in {data_dir}: a migration was "
                       "started here before", code="migration_started",
                       hint=f"if {db_path.name} is not yet converted, move {kept.name} back "
                       f"to {db_path.name}, remove {work.name}/ and run it again")
    schema1.checkpoint(db_path)
    schema = _schema_of(db_path)  # refuses anything else, before a byte is copied
    kept = data_dir / kept_name(schema)
    shutil.copy2(db_path, kept)
    old = schema1.Schema1(kept) if schema == 1 else schema2.Schema2(kept)
    new = open_import_target(work)
    try:
        new.review_store()  # Memory Git's tables
        with new.write():
            changesets = _copy2(old, new) if isinstance(old, schema2.Schema2) \
                else _copy(old, new)
        report = Core(new, None).rebuild(repair=True)
    finally:
        new.close()
        old.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    os.replace(work / "palimpsest.db", db_path)
    shutil.rmtree(work)
    return {"object": "memory.migration", "from_schema": schema, "to_schema": SCHEMA_VERSION,
            "changesets": changesets, "records": report["records"],
            "versions": report["versions"], "kept": str(kept)}


__all__ = ["kept_name", "migrate"]
