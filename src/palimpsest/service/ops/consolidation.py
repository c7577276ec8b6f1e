"""Consolidations: the deterministic consolidator, its runs, changes and revert."""

from __future__ import annotations

from palimpsest import canonical
from palimpsest.search.analyzer import analyze
from palimpsest.service import history, wire
from palimpsest.service.core import Core, mint
from palimpsest.service.model import (
    PROVIDER_ID,
    Caller,
    Op,
    Principal,
    RecordBody,
    Wire,
    record_not_found,
)
from palimpsest.service.ops import records

PROVIDER = Principal("provider", PROVIDER_ID)


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
            if head is None or head.status != "forgotten":
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


__all__ = [
    "consolidate",
    "consolidation_changes",
    "get_consolidation",
    "list_consolidations",
    "revert_consolidation",
]
