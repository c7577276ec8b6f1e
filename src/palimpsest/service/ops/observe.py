"""Observe and jobs (uhp-memories.md §6.2): a turn's episodes kept as records at once."""

from __future__ import annotations

from palimpsest.service import history, wire
from palimpsest.service.core import Core, mint
from palimpsest.service.model import (
    Caller,
    Op,
    Wire,
    invalid,
    record_not_found,
)
from palimpsest.service.ops import records


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
            if head is not None and head.memory_id == memory_id:
                data.append(records._current_wire(core, view, rid))
        return {"object": "memory.job", "id": job["id"], "status": job["status"],
                "error": job["error"], "data": data}


__all__ = ["get_job", "observe"]
