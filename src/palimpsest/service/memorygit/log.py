"""Read side of a memory's own history: refs and changesets of the service's writes."""

from __future__ import annotations

from palimpsest.service import history, wire
from palimpsest.service.core import Core
from palimpsest.service.model import Caller, Wire, invalid, record_not_found


def list_refs(core: Core, caller: Caller, memory_id: str) -> Wire:
    """Refs of a memory (read)."""
    with core.store.read():
        core.resolve(caller, memory_id, "read")
        return {"object": "list", "data": [r.to_wire() for r in core.store.refs(memory_id)]}


def list_changesets(core: Core, caller: Caller, memory_id: str, *, ref: str,
                    limit: int) -> Wire:
    """Changesets reachable from ``ref`` along first parents, newest first, verified."""
    limit = wire.integer(limit, "limit", lo=1, hi=200)
    if not isinstance(ref, str) or not ref.startswith("refs/") or len(ref) > 300:
        raise invalid("ref must be a ref name such as refs/shared/main")
    with core.store.read():
        core.resolve(caller, memory_id, "read")
        r = core.store.ref(memory_id, ref)
        out: list[Wire] = []
        cid = r.head if r else None
        while cid is not None and len(out) < limit:
            found = core.store.changeset(cid)
            if found is None:
                break
            cs = history.verify(found)
            out.append(cs.to_wire())
            cid = cs.parent_ids[0] if cs.parent_ids else None
    return {"object": "list", "data": out, "project": memory_id, "ref": ref}


def get_changeset(core: Core, caller: Caller, memory_id: str, changeset_id: str) -> Wire:
    """One changeset of this memory, its integrity digest verified."""
    with core.store.read():
        core.resolve(caller, memory_id, "read")
        found = core.store.changeset(changeset_id) if isinstance(changeset_id, str) else None
        if found is None or found.memory_id != memory_id:
            raise record_not_found()
        return history.verify(found).to_wire()


__all__ = ["get_changeset", "list_changesets", "list_refs"]
