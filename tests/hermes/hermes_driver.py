"""Driver run INSIDE the hermes-agent 0.19.0 virtual environment (not by pytest directly).

It loads the provider the way Hermes does — `plugins.memory.load_memory_provider` from
`$HERMES_HOME/plugins/` — and drives it through Hermes' own `MemoryManager`:
initialize_all → per turn ([queue_prefetch_all of the turn's "warm" query, when it has one] →
prefetch_all(ask) → sync_all) → shutdown_all. A turn without "warm" is what Hermes does on the
first turn of a session: nothing was queued before it.
Reads a JSON plan on stdin, prints one JSON result on stdout; any exception escapes (the test
asserts the process exits 0, which is the "no exception reaches Hermes" check).
"""

import json
import sys


def main() -> None:
    plan = json.load(sys.stdin)
    from agent.memory_manager import MemoryManager
    from agent.memory_provider import MemoryProvider
    from plugins.memory import (
        _get_active_memory_provider,
        discover_memory_providers,
        load_memory_provider,
    )

    provider = load_memory_provider("palimpsest")
    out = {
        "active": _get_active_memory_provider(),
        "discovered": [
            list(item) for item in discover_memory_providers() if item[0] == "palimpsest"
        ],
        "is_memory_provider": isinstance(provider, MemoryProvider),
        "available": provider.is_available(),
        "module": type(provider).__module__,
        "turns": [],
    }
    manager = MemoryManager()
    manager.add_provider(provider)
    manager.initialize_all(session_id=plan["session"], platform="cli", agent_context="primary")
    out["tools"] = [schema["name"] for schema in manager.get_all_tool_schemas()]
    for turn in plan["turns"]:
        if turn.get("warm"):
            manager.queue_prefetch_all(turn["warm"], session_id=plan["session"])
            manager.flush_pending(timeout=30)
            provider.wait_idle(30)
        text = manager.prefetch_all(turn["ask"], session_id=plan["session"])
        status = provider.recall_status()
        manager.sync_all(
            turn["ask"],
            "assistant reply",
            session_id=plan["session"],
            messages=[{"role": "user", "content": turn["ask"]}],
        )
        manager.flush_pending(timeout=30)
        if turn.get("reset"):
            manager.on_session_switch(plan["session"], reset=True)
        out["turns"].append({"text": text, "status": status})
    if plan.get("search"):
        out["search"] = json.loads(
            manager.handle_tool_call("palimpsest_search", {"query": plan["search"]})
        )
    manager.shutdown_all()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
