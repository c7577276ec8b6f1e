"""Operations on the tree of memories and on grants (uhp-memories.md §3, §4, §6.1)."""

from __future__ import annotations

from typing import Any

from palimpsest.errors import NotFound
from palimpsest.service import providers, wire
from palimpsest.service.access import View
from palimpsest.service.core import Core, mint
from palimpsest.service.model import (
    ALL_PRIVILEGES,
    PROVIDER_ID,
    Caller,
    Grant,
    Memory,
    Wire,
    forbidden,
    invalid,
    not_found,
    unsupported,
)

GLOBAL_SCOPE = "-"


def create_memory(core: Core, caller: Caller, body: Wire, key: str | None) -> Wire:
    """``POST /v1/memories``."""
    b = wire.obj(body, "body", ("name", "description", "parent_id", "restricted", "provider"))
    name = wire.string(b.get("name"), "name", max_len=wire.MAX_NAME)
    description = wire.string(b.get("description", ""), "description",
                              max_len=wire.MAX_DESCRIPTION, blank=True)
    parent_id = None if b.get("parent_id") is None else wire.ident(b["parent_id"], "parent_id")
    restricted = wire.boolean(b.get("restricted", False), "restricted")
    provider = None if b.get("provider") is None else wire.string(b["provider"], "provider",
                                                                  max_len=64)
    if provider == providers.REPOSITORY_PROVIDER:
        raise unsupported("a repository's memory is mounted by the operator: create the memory, "
                          "then pal admin mount-repo PATH --memory ID")
    if provider is not None and not providers.is_known(provider):
        raise unsupported("no such provider is connected; see GET /v1/memories/providers")
    request = {"name": name, "description": description, "parent_id": parent_id,
               "restricted": restricted, "provider": provider}

    def check() -> None:
        if parent_id is not None:
            core.resolve(caller, parent_id, "create")

    def apply(_key: str) -> Wire:
        tree = core.tree()
        inherited = tree.nodes[parent_id].provider if parent_id else PROVIDER_ID
        if inherited == providers.REPOSITORY_PROVIDER:
            inherited = PROVIDER_ID  # a mount is one repository: its children are the server's
        now = core.now_ms()
        m = Memory(mint("hmem"), name, description, parent_id, restricted,
                   provider or inherited, caller.member.id, now, now)
        core.store.insert_memory(m)
        return core.memory_wire(core.view(caller), m)

    return core.idempotent(caller, GLOBAL_SCOPE, "create_memory", request, key, apply, check)


def list_memories(core: Core, caller: Caller, *, parent: str | None, ancestor: str | None,
                  granted: bool, limit: int, cursor: str | None) -> Wire:
    """``GET /v1/memories`` in its three forms."""
    if sum((parent is not None, ancestor is not None, bool(granted))) > 1:
        raise invalid("use at most one of parent, ancestor, granted")
    limit = wire.integer(limit, "limit", lo=1, hi=wire.MAX_LIST_LIMIT)
    offset = 0
    if cursor is not None:
        if not cursor.isdigit() or len(cursor) > 9:
            raise invalid("cursor is not one this server issued")
        offset = int(cursor)
    with core.store.read():
        if parent is not None:
            view, _ = core.resolve(caller, parent, None)
            ids = view.visible_children(parent)
        elif ancestor is not None:
            view, _ = core.resolve(caller, ancestor, None)
            ids = [m for m in view.tree.descendants(ancestor) if view.can(m, "read")]
        else:
            view = core.view(caller)
            ids = view.granted() if granted else view.entry_points()
        page = ids[offset:offset + limit]
        data = [core.memory_wire(view, view.tree.nodes[m]) for m in page]
    nxt = str(offset + limit) if offset + limit < len(ids) else None
    return {"object": "list", "data": data, "next": nxt}


def get_memory(core: Core, caller: Caller, memory_id: str) -> Wire:
    """``GET /v1/memories/{id}``."""
    with core.store.read():
        view, m = core.resolve(caller, memory_id, None)
        return core.memory_wire(view, m)


def update_memory(core: Core, caller: Caller, memory_id: str, body: Wire,
                  key: str | None) -> Wire:
    """``PUT /v1/memories/{id}``: rename, describe, restrict, move."""
    b = wire.obj(body, "body", ("name", "description", "parent_id", "restricted", "provider"))
    changes: dict[str, Any] = {}
    if "name" in b:
        changes["name"] = wire.string(b["name"], "name", max_len=wire.MAX_NAME)
    if "description" in b:
        changes["description"] = wire.string(b["description"] if b["description"] is not None
                                             else "", "description",
                                             max_len=wire.MAX_DESCRIPTION, blank=True)
    if "restricted" in b:
        changes["restricted"] = wire.boolean(b["restricted"], "restricted")
    if "parent_id" in b:
        changes["parent_id"] = None if b["parent_id"] is None else wire.ident(b["parent_id"],
                                                                              "parent_id")
    if not changes and "provider" not in b:
        raise invalid("nothing to change: give name, description, parent_id or restricted")

    def check() -> None:
        view, m = core.resolve(caller, memory_id, None)
        if "provider" in b and b["provider"] != m.provider:
            raise invalid("a memory's provider cannot be changed")
        if ("name" in changes or "description" in changes) and not view.can(memory_id,
                                                                             "write"):
            raise forbidden("write")
        if ("restricted" in changes or "parent_id" in changes) and not view.can(memory_id,
                                                                                 "delete"):
            raise forbidden("delete")
        if "parent_id" in changes and changes["parent_id"] != m.parent_id:
            new_parent = changes["parent_id"]
            if new_parent is not None:
                core.resolve(caller, new_parent, "create")
            if view.tree.would_cycle(memory_id, new_parent):
                raise invalid("a memory cannot move under itself or its descendants")

    def apply(_key: str) -> Wire:
        m = core.tree().nodes[memory_id]
        new = Memory(m.id, changes.get("name", m.name),
                     changes.get("description", m.description),
                     changes.get("parent_id", m.parent_id),
                     changes.get("restricted", m.restricted), m.provider, m.created_by,
                     m.created_at, core.now_ms())
        core.store.update_memory(new)
        view = core.view(caller)
        if not view.sees(memory_id):
            # Restricting or moving may leave the caller outside; say so without the object.
            return {"id": memory_id, "object": "memory", "privileges": []}
        return core.memory_wire(view, new)

    return core.idempotent(caller, memory_id, "update_memory", changes, key, apply, check)


def delete_memory(core: Core, caller: Caller, memory_id: str, key: str | None) -> Wire:
    """``DELETE /v1/memories/{id}``: the memory, its records and every descendant."""
    seen: list[str] = []

    def check() -> None:
        view, _ = core.resolve(caller, memory_id, "delete")
        seen.clear()
        seen.extend([memory_id, *[d for d in view.tree.descendants(memory_id)
                                  if view.sees(d)]])

    def apply(_key: str) -> Wire:
        ids = [memory_id, *core.tree().descendants(memory_id)]
        core.store.delete_memories(ids)
        # Only ids the caller could see are named: the rest must not reveal themselves.
        return {"id": memory_id, "object": "memory", "deleted": True, "memories": list(seen)}

    return core.idempotent(caller, "-delete-" + memory_id, "delete_memory", {}, key, apply,
                           check, check_replays=False)


# --- grants --------------------------------------------------------------------------------
def _creator_grant(m: Memory) -> Grant:
    return Grant(f"creator_{m.id}", m.id, f"member:{m.created_by}", ALL_PRIVILEGES,
                 m.created_at)


def list_grants(core: Core, caller: Caller, memory_id: str) -> Wire:
    """Grants on the node and inherited from ancestors down to the cutoff."""
    with core.store.read():
        view, m = core.resolve(caller, memory_id, "read")
        data: list[Wire] = []
        chain = [memory_id]
        node = m
        while not node.restricted and node.parent_id is not None \
                and node.parent_id in view.tree.nodes:
            chain.append(node.parent_id)
            node = view.tree.nodes[node.parent_id]
        for mid in chain:
            inherited = mid != memory_id
            owner = view.tree.nodes[mid]
            data.append(_creator_grant(owner).to_wire(inherited=inherited))
            data.extend(g.to_wire(inherited=inherited)
                        for g in sorted(view.tree.grants.get(mid, ()),
                                        key=lambda g: (g.created_at, g.id)))
    return {"object": "list", "data": data}


def grant_holders(core: Core, caller: Caller, memory_id: str) -> Wire:
    """:func:`list_grants` for a holder of ``delete`` here (who manages these grants), each
    grant's holder named: ``holder: {name, type?}`` for a member (``type`` human | agent) or a
    group, ``null`` for one that no longer exists."""
    with core.store.read():
        core.resolve(caller, memory_id, "delete")
        listed = list_grants(core, caller, memory_id)
        for grant in listed["data"]:
            kind, _, ident = str(grant["principal"]).partition(":")
            holder: Wire | None = None
            if kind == "member" and (member := core.store.member(ident)) is not None:
                holder = {"name": member.name, "type": member.type}
            elif kind == "group" and (group := core.store.group(ident)) is not None:
                holder = {"name": group.name}
            grant["holder"] = holder
    return listed


def put_grant(core: Core, caller: Caller, memory_id: str, body: Wire, key: str | None) -> Wire:
    """``POST /v1/memories/{id}/grants``: one grant per principal per node."""
    b = wire.obj(body, "body", ("principal", "privileges"))
    kind, pid = wire.principal(b.get("principal"))
    privs = wire.privileges(b.get("privileges"))
    request = {"principal": f"{kind}:{pid}", "privileges": sorted(privs)}

    def check() -> None:
        core.resolve(caller, memory_id, "delete")
        exists = core.store.member(pid) if kind == "member" else core.store.group(pid)
        if exists is None:
            raise invalid(f"no such {kind}; create it with pal admin first")

    def apply(_key: str) -> Wire:
        g = core.store.upsert_grant(Grant(mint("hgr"), memory_id, f"{kind}:{pid}", privs,
                                          core.now_ms()))
        return g.to_wire()

    return core.idempotent(caller, memory_id, "put_grant", request, key, apply, check)


def delete_grant(core: Core, caller: Caller, memory_id: str, grant_id: str,
                 key: str | None) -> Wire:
    """``DELETE /v1/memories/{id}/grants/{grant_id}``."""
    def check() -> None:
        core.resolve(caller, memory_id, "delete")

    def apply(_key: str) -> Wire:
        if grant_id.startswith("creator_"):
            raise invalid("the creator's implicit grant cannot be removed")
        if not core.store.delete_grant(memory_id, grant_id):
            raise NotFound("no such grant on this memory", code=not_found().code)
        return {"id": grant_id, "object": "memory.grant", "deleted": True}

    return core.idempotent(caller, memory_id, "delete_grant", {"grant_id": grant_id}, key,
                           apply, check)


def nav_entry(m: Memory, records: int) -> Wire:
    """A parent/child entry of a recall or listing response."""
    return {"id": m.id, "name": m.name, "description": m.description,
            "records": {"count": records}}


def navigation(core: Core, view: View, m: Memory) -> Wire:
    """``parent`` (only when readable) and the readable ``children``."""
    kids = view.readable_children(m.id)
    parent = m.parent_id if m.parent_id and view.can(m.parent_id, "read") else None
    counts = core.record_counts([*kids, *([parent] if parent else [])])
    out: Wire = {"children": [nav_entry(view.tree.nodes[c], counts[c]) for c in kids]}
    if parent is not None:
        out["parent"] = nav_entry(view.tree.nodes[parent], counts[parent])
    return out


__all__ = [
    "create_memory",
    "delete_grant",
    "delete_memory",
    "get_memory",
    "grant_holders",
    "list_grants",
    "list_memories",
    "nav_entry",
    "navigation",
    "put_grant",
    "update_memory",
]
