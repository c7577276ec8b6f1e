"""The record graph around a set of records (uhp-memories.md §8)."""

from __future__ import annotations

from palimpsest.service import wire
from palimpsest.service.core import Core
from palimpsest.service.model import (
    Caller,
    Wire,
    invalid,
    record_not_found,
)
from palimpsest.service.ops import records


def graph(core: Core, caller: Caller, memory_id: str, body: Wire) -> Wire:
    """Entities, facts and their edges over the readable subtree."""
    b = wire.obj(body, "body", ("around", "hops", "types", "limit"))
    hops = wire.integer(b.get("hops", 1), "hops", lo=0, hi=3)
    limit = wire.integer(b.get("limit", 200), "limit", lo=1, hi=1000)
    types = None
    if b.get("types") is not None:
        if not isinstance(b["types"], list):
            raise invalid("types must be a list")
        types = {wire.record_type(t, "types[]") for t in b["types"]}
    around = wire.ident(b["around"], "around") if b.get("around") is not None else None
    with core.store.read():
        view, _ = core.resolve(caller, memory_id, "read")
        reach = view.readable_reach(memory_id)
        readable = set(reach)
        if around is not None:
            head = core.store.record_head(around)
            if head is None or head.memory_id not in readable:
                raise record_not_found()
            start = [around]
        else:
            start = [str(r.record_id) for r in core.store.current_rows(
                core.store.newest_ns(reach, ("active",), limit))]
        nodes: dict[str, Wire] = {}
        edges: dict[tuple[str, str, str], Wire] = {}
        truncated = False
        frontier = start
        seen = set(start)
        for level in range(hops + 1):
            for rid in frontier:
                if len(nodes) >= limit:
                    truncated = True
                    break
                head = core.store.record_head(rid)
                if head is None or head.memory_id not in readable \
                        or head.status != "active":
                    continue
                rec = records._current(core, rid, head.memory_id)
                if types is None or rec.body.type in types:
                    nodes[rid] = {"record": core.render(view, rec),
                                  "memory": {"id": rec.memory_id,
                                             "name": view.tree.nodes[rec.memory_id].name}}
            if level == hops or truncated:
                break
            nxt: list[str] = []
            for e in core.store.edges_touching(frontier):
                if e.memory_id not in readable:
                    continue  # an edge written in a memory the caller cannot read
                src, dst = e.src, e.dst
                if src in frontier and dst not in seen:
                    nxt.append(dst)
                elif dst in frontier and src not in seen:
                    nxt.append(src)
                seen.update((src, dst))
            frontier = list(dict.fromkeys(nxt))
        # Edges among the nodes, and out of them into unreadable memories.
        for e in core.store.edges_touching(list(nodes)):
            src, dst = e.src, e.dst
            if src not in nodes or e.memory_id not in readable:
                continue
            tgt = core.store.record_head(dst)
            tmem = tgt.memory_id if tgt is not None else None
            frm = {"memory_id": nodes[src]["memory"]["id"], "record_id": src}
            if tmem is not None and tmem in view.tree.nodes and view.can(tmem, "read"):
                edges[(src, dst, e.rel)] = {"from": frm, "to": {"memory_id": tmem,
                                                                   "record_id": dst},
                                               "rel": e.rel, "available": True}
            else:
                edges[(src, dst, "")] = {"from": frm, "to": {"record_id": dst},
                                         "available": False}
    return {"object": "memory.graph", "nodes": list(nodes.values()),
            "edges": list(edges.values()), "truncated": truncated, "degraded": []}


__all__ = ["graph"]
