"""Harness memory settings: an agent's granted memories and its default."""

from __future__ import annotations

from palimpsest.service import wire
from palimpsest.service.core import Core
from palimpsest.service.model import (
    Caller,
    Wire,
    invalid,
    not_found,
)


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


__all__ = ["harness_memories", "set_harness_memories"]
