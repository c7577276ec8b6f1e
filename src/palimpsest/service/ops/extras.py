"""Observe and jobs, graph, prime, named queries, snapshots, consolidations and harness
settings (uhp-memories.md §6.2, §6.3, §8, §10)."""

from __future__ import annotations

from typing import Any

from palimpsest import canonical
from palimpsest.search.analyzer import analyze
from palimpsest.service import history, wire
from palimpsest.service.core import Core, mint
from palimpsest.service.model import (
    CORE_TYPES,
    PROVIDER_ID,
    SERVER_TYPES,
    SHARED_MAIN,
    Caller,
    Op,
    Principal,
    RecordBody,
    Wire,
    forbidden,
    invalid,
    not_found,
    record_not_found,
    unsupported,
)
from palimpsest.service.ops import recall as rc
from palimpsest.service.ops import records

PROVIDER = Principal("provider", PROVIDER_ID)


# --- observe and jobs ----------------------------------------------------------------------
def observe(core: Core, caller: Caller, memory_id: str, body: Wire, key: str | None) -> Wire:
    """Episodes are kept at once as ``episode`` records; a completed job names them."""
    b = wire.obj(body, "body", ("episodes",))
    eps = b.get("episodes")
    if not isinstance(eps, list) or not eps or len(eps) > wire.MAX_EPISODES:
        raise invalid(f"episodes must be a non-empty list of at most {wire.MAX_EPISODES}")
    drafts = []
    for i, ep in enumerate(eps):
        # title and time (when the turn happened) are this server's additions to an episode.
        e = wire.obj(ep, f"episodes[{i}]", ("content", "attributes", "title", "time"))
        drafts.append(wire.record_draft({"type": "episode", **e}))

    def check() -> None:
        core.resolve(caller, memory_id, "write")

    def apply(k: str) -> Wire:
        ops = []
        ids = []
        for d in drafts:
            parts = records._resolve_parts(core, caller.member.id, d.content)
            rb = wire.merge_draft(None, d, parts)
            rid = mint("hrec")
            ids.append(rid)
            ops.append(Op("add_record", None, {
                "record_id": rid, "body_digest": core.seal(rb),
                **history.writer_payload(core.now_iso(), caller.writer)}))
        core.commit(memory_id, caller.writer, k, ops, "observe")
        job_id = mint("hjob")
        job = {"object": "memory.job", "id": job_id, "status": "completed", "error": None,
               "record_ids": ids}
        core.store.put_doc("job", job_id, memory_id, core.now_ms(), job)
        view = core.view(caller)
        data = [records._current_wire(core, view, rid) for rid in ids]
        return {"object": "list", "data": data,
                "job": {"object": "memory.job", "id": job_id, "status": "completed"}}

    return core.idempotent(caller, memory_id, "observe", body, key, apply, check)


def get_job(core: Core, caller: Caller, memory_id: str, job_id: str) -> Wire:
    """A job of this memory with its records as they are now."""
    with core.store.read():
        view, _ = core.resolve(caller, memory_id, "read")
        found = core.store.doc("job", job_id)
        if found is None or found[0] != memory_id:
            raise record_not_found()
        job = found[1]
        data = []
        for rid in job["record_ids"]:
            head = core.store.record_head(rid)
            if head is not None and head["memory_id"] == memory_id:
                data.append(records._current_wire(core, view, rid))
        return {"object": "memory.job", "id": job["id"], "status": job["status"],
                "error": job["error"], "data": data}


# --- graph ---------------------------------------------------------------------------------
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
            if head is None or head["memory_id"] not in readable:
                raise record_not_found()
            start = [around]
        else:
            start = [str(r["record_id"]) for r in core.store.current_rows(
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
                if head is None or head["memory_id"] not in readable \
                        or head["status"] != "active":
                    continue
                rec = records._current(core, rid, head["memory_id"])
                if types is None or rec.body.type in types:
                    nodes[rid] = {"record": core.render(view, rec),
                                  "memory": {"id": rec.memory_id,
                                             "name": view.tree.nodes[rec.memory_id].name}}
            if level == hops or truncated:
                break
            nxt: list[str] = []
            for e in core.store.edges_touching(frontier):
                if e["memory_id"] not in readable:
                    continue  # an edge written in a memory the caller cannot read
                src, dst = e["src"], e["dst"]
                if src in frontier and dst not in seen:
                    nxt.append(dst)
                elif dst in frontier and src not in seen:
                    nxt.append(src)
                seen.update((src, dst))
            frontier = list(dict.fromkeys(nxt))
        # Edges among the nodes, and out of them into unreadable memories.
        for e in core.store.edges_touching(list(nodes)):
            src, dst = e["src"], e["dst"]
            if src not in nodes or e["memory_id"] not in readable:
                continue
            tgt = core.store.record_head(dst)
            tmem = tgt["memory_id"] if tgt is not None else None
            frm = {"memory_id": nodes[src]["memory"]["id"], "record_id": src}
            if tmem is not None and tmem in view.tree.nodes and view.can(tmem, "read"):
                edges[(src, dst, e["rel"])] = {"from": frm, "to": {"memory_id": tmem,
                                                                   "record_id": dst},
                                               "rel": e["rel"], "available": True}
            else:
                edges[(src, dst, "")] = {"from": frm, "to": {"record_id": dst},
                                         "available": False}
    return {"object": "memory.graph", "nodes": list(nodes.values()),
            "edges": list(edges.values()), "truncated": truncated, "degraded": []}


# --- prime ---------------------------------------------------------------------------------
def prime(core: Core, caller: Caller, memory_id: str, budget: Any) -> Wire:
    """Standing records within a token budget, fenced as data."""
    budget = wire.integer(budget, "budget", lo=1, hi=1_000_000)
    with core.store.read():
        view, m = core.resolve(caller, memory_id, "read")
        recs = [core.render(view, core.version(r)) for r in core.store.standing_rows(memory_id)]
        kids = [view.tree.nodes[c] for c in view.readable_children(memory_id)]
    text, tokens, placed, truncated = rc.prime_text(m, kids, recs, budget)
    return {"object": "memory.prime", "memory_id": memory_id, "text": text, "tokens": tokens,
            "budget": budget, "records": placed, "truncated": truncated}


# --- named queries -------------------------------------------------------------------------
def list_queries(core: Core, caller: Caller, memory_id: str) -> Wire:
    """Named queries of a memory."""
    with core.store.read():
        core.resolve(caller, memory_id, "read")
        docs = core.store.docs("query", memory_id)
    return {"object": "list", "data": sorted(docs, key=lambda d: d["name"])}


def put_query(core: Core, caller: Caller, memory_id: str, name: str, body: Wire,  # noqa: PLR0917
              key: str | None) -> Wire:
    """Define or replace a named query (a recall template)."""
    if not isinstance(name, str) or not wire.QUERY_NAME_RE.fullmatch(name):
        raise invalid("a query name is 1-64 of A-Z a-z 0-9 _")
    b = wire.obj(body, "body", ("description", "params", "requires", "language", "body"))
    description = wire.string(b.get("description", ""), "description",
                              max_len=wire.MAX_DESCRIPTION, blank=True)
    params = b.get("params", {"type": "object"})
    if not isinstance(params, dict):
        raise invalid("params must be a JSON Schema object")
    requires = b.get("requires", "read")
    if requires not in ("read", "write"):
        raise invalid("requires must be read or write")
    language = b.get("language", "recall")
    if language != "recall":
        raise unsupported("the built-in provider runs named queries in the language recall")
    template = b.get("body")
    if not isinstance(template, dict):
        raise invalid("body must be a recall request object")
    wire.recall_request(_substitute(template, {}, check_only=True))
    doc = {"object": "memory.query", "name": name, "memory_id": memory_id,
           "description": description, "params": params, "requires": requires,
           "language": "recall", "body": template}

    def check() -> None:
        core.resolve(caller, memory_id, "write")

    def apply(_k: str) -> Wire:
        core.store.put_doc("query", f"{memory_id}/{name}", memory_id, core.now_ms(), doc)
        return doc

    return core.idempotent(caller, memory_id, "put_query", doc, key, apply, check)


def _substitute(value: Any, params: dict[str, Any], *, check_only: bool = False) -> Any:
    """Replace ``"$name"`` strings by parameters (a placeholder when only checking)."""
    if isinstance(value, str) and value.startswith("$") and len(value) > 1:
        pname = value[1:]
        if check_only:
            return "x"
        if pname not in params:
            raise invalid(f"missing parameter {pname!r}")
        return params[pname]
    if isinstance(value, dict):
        return {k: _substitute(v, params, check_only=check_only) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, params, check_only=check_only) for v in value]
    return value


def run_query(core: Core, caller: Caller, memory_id: str, name: str, body: Wire) -> Wire:
    """Run a named query: its ``requires`` is checked, then it is a recall."""
    b = wire.obj(body or {}, "body", ("params",))
    params = b.get("params") or {}
    if not isinstance(params, dict):
        raise invalid("params must be an object")
    with core.store.read():
        view, _ = core.resolve(caller, memory_id, None)
        found = core.store.doc("query", f"{memory_id}/{name}")
        if found is None:
            raise record_not_found()
        doc = found[1]
        if not view.can(memory_id, doc["requires"]):
            raise forbidden(doc["requires"])
    return records.recall(core, caller, memory_id, _substitute(doc["body"], params))


# --- snapshots -----------------------------------------------------------------------------
def create_snapshot(core: Core, caller: Caller, memory_id: str, body: Wire,
                    key: str | None) -> Wire:
    """Name an instant (and the head of refs/shared/main); copies nothing."""
    b = wire.obj(body, "body", ("name", "message"))
    name = wire.string(b.get("name"), "name", max_len=wire.MAX_NAME)
    message = wire.opt_string(b.get("message"), "message", max_len=wire.MAX_DESCRIPTION)

    def check() -> None:
        core.resolve(caller, memory_id, "write")

    def apply(_k: str) -> Wire:
        ref = core.store.ref(memory_id, SHARED_MAIN)
        sid = mint("hsnp")
        doc = {"id": sid, "object": "memory.snapshot", "memory_id": memory_id, "name": name,
               "message": message, "at": core.now_iso(), "head": ref.head if ref else None}
        core.store.put_doc("snapshot", sid, memory_id, core.now_ms(), doc)
        return doc

    return core.idempotent(caller, memory_id, "snapshot", {"name": name, "message": message},
                           key, apply, check)


def list_snapshots(core: Core, caller: Caller, memory_id: str) -> Wire:
    """Snapshots newest first."""
    with core.store.read():
        core.resolve(caller, memory_id, "read")
        return {"object": "list", "data": core.store.docs("snapshot", memory_id)}


# --- consolidations ------------------------------------------------------------------------
def _signature(body: RecordBody) -> str:
    return canonical.encode([body.type, analyze(body.text),
                             dict(body.attributes)]).decode()


def consolidate(core: Core, caller: Caller, memory_id: str, body: Wire,
                key: str | None) -> Wire:
    """The deterministic consolidator: active non-episode records that say the same thing
    (same type, same analysed words, same attributes) are forgotten in favour of the oldest."""
    b = wire.obj(body or {}, "body", ("budget",))
    limit = wire.integer(b.get("budget", 1000), "budget", lo=1, hi=100_000)

    def check() -> None:
        core.resolve(caller, memory_id, "write")

    def apply(k: str) -> Wire:
        run_id = mint("hcon")
        started = core.now_iso()
        rows = core.store.list_current(memory_id, ("active",), None, None, 100_000)
        rows.reverse()  # oldest first
        first: dict[str, str] = {}
        changes: list[dict[str, str]] = []
        episodes = 0
        through = None
        exhausted = False
        ops: list[Op] = []
        for row in rows:
            rec = core.version(row)
            if rec.body.type == "episode":
                episodes += 1
                through = rec.written_at
                continue
            sig = _signature(rec.body)
            if sig not in first:
                first[sig] = rec.id
                continue
            if len(ops) >= limit:
                exhausted = True
                break
            ops.append(Op("forget_record", rec.id, history.writer_payload(
                core.now_iso(), PROVIDER, on_behalf_of=caller.writer,
                consolidation_id=run_id)))
            changes.append({"change": "forgotten", "record_id": rec.id,
                            "kept": first[sig]})
        if ops:
            core.commit(memory_id, PROVIDER, k, ops, f"consolidation {run_id}")
        run = {"id": run_id, "object": "memory.consolidation", "memory_id": memory_id,
               "status": "stopped" if exhausted else "completed", "trigger": "request",
               "started_at": started, "finished_at": core.now_iso(),
               "read": {"episodes": episodes, "through": through},
               "changes": {"created": 0, "superseded": 0, "forgotten": len(changes)},
               "usage": {"input_tokens": 0, "output_tokens": 0},
               "budget": {"limit": limit, "unit": "records", "exhausted": exhausted},
               "written_by": PROVIDER.to_wire(), "error": None, "reverted_at": None,
               "change_list": changes}
        core.store.put_doc("consolidation", run_id, memory_id, core.now_ms(), run)
        return _public_run(run)

    return core.idempotent(caller, memory_id, "consolidate", {"budget": limit}, key, apply,
                           check)


def _public_run(run: Wire) -> Wire:
    return {k: v for k, v in run.items() if k != "change_list"}


def _run(core: Core, memory_id: str, run_id: str) -> Wire:
    found = core.store.doc("consolidation", run_id)
    if found is None or found[0] != memory_id:
        raise record_not_found()
    doc: Wire = found[1]
    return doc


def list_consolidations(core: Core, caller: Caller, memory_id: str) -> Wire:
    """Runs newest first."""
    with core.store.read():
        core.resolve(caller, memory_id, "read")
        return {"object": "list", "data": [_public_run(r) for r in
                                           core.store.docs("consolidation", memory_id)]}


def get_consolidation(core: Core, caller: Caller, memory_id: str, run_id: str) -> Wire:
    """One run."""
    with core.store.read():
        core.resolve(caller, memory_id, "read")
        return _public_run(_run(core, memory_id, run_id))


def consolidation_changes(core: Core, caller: Caller, memory_id: str, run_id: str) -> Wire:
    """``{change, record}`` for each change of a run (records as they are now)."""
    with core.store.read():
        view, _ = core.resolve(caller, memory_id, "read")
        run = _run(core, memory_id, run_id)
        data = []
        for ch in run["change_list"]:
            head = core.store.record_head(ch["record_id"])
            rec = records._current_wire(core, view, ch["record_id"]) if head else None
            data.append({"change": ch["change"], "record": rec})
    return {"object": "list", "data": data}


def revert_consolidation(core: Core, caller: Caller, memory_id: str, run_id: str,
                         key: str | None) -> Wire:
    """Undo a run by appending: each record it forgot returns as a new active version."""
    def check() -> None:
        core.resolve(caller, memory_id, "delete")

    def apply(k: str) -> Wire:
        run = _run(core, memory_id, run_id)
        if run.get("reverted_at"):
            return _public_run(run)
        ops = []
        for ch in run["change_list"]:
            head = core.store.record_head(ch["record_id"])
            if head is None or head["status"] != "forgotten":
                continue
            rec = records._current(core, ch["record_id"], memory_id)
            ops.append(Op("revise_record", rec.id, {
                "body_digest": core.seal(rec.body),
                **history.writer_payload(core.now_iso(), PROVIDER, on_behalf_of=caller.writer,
                                         consolidation_id=run_id)}))
        if ops:
            core.commit(memory_id, PROVIDER, k, ops, f"revert {run_id}")
        run["reverted_at"] = core.now_iso()
        core.store.put_doc("consolidation", run_id, memory_id, core.now_ms(), run)
        return _public_run(run)

    return core.idempotent(caller, memory_id, "revert", {"run": run_id}, key, apply, check)


# --- harness memory settings ---------------------------------------------------------------
def _harness_member(core: Core, caller: Caller, harness_id: str) -> None:
    if caller.member.id != harness_id and not caller.member.admin:
        raise not_found()
    if core.store.member(harness_id) is None:
        raise not_found()


def harness_memories(core: Core, caller: Caller, harness_id: str) -> Wire:
    """``harness.memories``: the agent's granted memories, highest first, and its default."""
    with core.store.read():
        _harness_member(core, caller, harness_id)
        agent = core.caller_for(harness_id)
        view = core.view(agent)
        found = core.store.doc("harness", harness_id)
        settings = found[1] if found else {"default_memory_id": None, "observe": True}
        default = settings["default_memory_id"]
        if not isinstance(default, str) or default not in view.tree.nodes \
                or not view.can(default, "write"):
            default = None  # a default the agent lost is no default
        data = [{"id": m, "name": view.tree.nodes[m].name,
                 "privileges": [p for p in ("read", "write", "create", "delete")
                                if p in view.privileges(m)], "default": m == default}
                for m in view.granted()]
    return {"object": "harness.memories", "principal": f"member:{harness_id}",
            "default_memory_id": default, "observe": settings["observe"], "data": data}


def set_harness_memories(core: Core, caller: Caller, harness_id: str, body: Wire,
                         key: str | None) -> Wire:
    """Set the default memory (must be writable by the agent) and ``observe``."""
    b = wire.obj(body, "body", ("default_memory_id", "observe"))
    default = None if b.get("default_memory_id") is None else wire.ident(
        b["default_memory_id"], "default_memory_id")
    observe_on = wire.boolean(b.get("observe", True), "observe")

    def check() -> None:
        _harness_member(core, caller, harness_id)
        if default is not None:
            view = core.view(core.caller_for(harness_id))
            if default not in view.tree.nodes or not view.can(default, "write"):
                raise invalid("the default memory must be one the agent may write")

    def apply(_k: str) -> Wire:
        core.store.put_doc("harness", harness_id, None, core.now_ms(),
                           {"default_memory_id": default, "observe": observe_on})
        return {"object": "harness.memories.settings", "default_memory_id": default,
                "observe": observe_on}

    core.idempotent(caller, "-harness-" + harness_id, "harness",
                    {"default_memory_id": default, "observe": observe_on}, key, apply, check)
    return harness_memories(core, caller, harness_id)


def types_list() -> Wire:
    """Core and server types; none declares operations."""
    data: list[Wire] = [{"type": t, "core": True} for t in CORE_TYPES]
    data += [{"type": t, "core": False, "description": f"a {t} the others are about",
              "schema": {"type": "object"}, "text": "title", "operations": [],
              "provider": PROVIDER_ID} for t in SERVER_TYPES]
    return {"object": "list", "data": data}


__all__ = ["consolidate", "consolidation_changes", "create_snapshot", "get_consolidation",
           "get_job", "graph", "harness_memories", "list_consolidations", "list_queries",
           "list_snapshots", "observe", "prime", "put_query", "revert_consolidation",
           "run_query", "set_harness_memories", "types_list"]
