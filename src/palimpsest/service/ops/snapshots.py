"""Snapshots: a named head of refs/shared/main at an instant."""

from __future__ import annotations

from palimpsest.service import wire
from palimpsest.service.core import Core, mint
from palimpsest.service.model import (
    SHARED_MAIN,
    Caller,
    Wire,
)


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


__all__ = ["create_snapshot", "list_snapshots"]
