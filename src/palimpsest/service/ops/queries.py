"""Named queries: stored recall requests with parameters (uhp-memories.md §10)."""

from __future__ import annotations

from typing import Any

from palimpsest.service import wire
from palimpsest.service.core import Core
from palimpsest.service.model import (
    Caller,
    Wire,
    forbidden,
    invalid,
    record_not_found,
    unsupported,
)
from palimpsest.service.ops import recall


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
    return recall.recall(core, caller, memory_id, _substitute(doc["body"], params))


__all__ = ["list_queries", "put_query", "run_query"]
