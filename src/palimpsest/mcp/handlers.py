"""Tool handlers: each turns validated arguments into one facade call for the caller.

Handlers are synchronous and run on the service's thread (the server decides which). They take a
:class:`ToolEnv` (the facade, the authenticated caller, the default memory) and the arguments,
and return the facade's wire value; refusals are :class:`~palimpsest.errors.PalError`. They
never choose reach: every call goes through the facade, which checks the caller's privileges.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from palimpsest.canonical import encode
from palimpsest.errors import InvalidInput, PalError
from palimpsest.mcp import render
from palimpsest.mcp.tools import REMEMBER_TYPES, WRITE_FLAG, Offers
from palimpsest.service.memories import MemoryService
from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.service.model import Caller

MAX_REASON_CHARS = 500
PRIME_DEFAULT_BUDGET = 4000
GRAPH_LIMIT = 60


@dataclass(frozen=True, slots=True)
class ToolEnv:
    """Everything a handler may use: the facade, the caller and its default memory (none of
    them in repository-only mode), the repository and whether it may be written."""

    facade: MemoryService | None
    member: Caller | None
    default_memory: str | None = None
    flow: ReviewFlow | None = None  # Memory Git (proposals, reviews, merges) when offered
    repo: str | None = None  # the Git repository of `pal mcp`'s directory (stdio only)
    repo_writes: bool = False  # `pal mcp --allow-repo-writes`

    @property
    def service(self) -> MemoryService:
        """The facade; service tools are offered only when there is one."""
        if self.facade is None:
            raise InvalidInput("no memory service is configured here", code="memory_unsupported")
        return self.facade

    @property
    def caller(self) -> Caller:
        """The authenticated member (there is one whenever there is a facade)."""
        if self.member is None:
            raise InvalidInput("no memory service is configured here", code="memory_unsupported")
        return self.member

    @property
    def principal(self) -> str:
        """The caller as Memory Git names it."""
        return f"member:{self.caller.member.id}"

    def git(self) -> ReviewFlow:
        """The Memory Git flow; tools of that group are offered only when it exists."""
        if self.flow is None:
            raise InvalidInput("Memory Git is not available here", code="memory_unsupported")
        return self.flow


Handler = Callable[[ToolEnv, dict[str, Any]], Any]


def _invalid(message: str) -> InvalidInput:
    return InvalidInput(message, code="memory_invalid")


def _str(args: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = args.get(key)
    if value is None:
        if required:
            raise _invalid(f"`{key}` is required")
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise _invalid(f"`{key}` must be a non-empty string")
    return value


def _int(args: dict[str, Any], key: str) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"`{key}` must be an integer")
    return value


def _obj(args: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid(f"`{key}` must be an object")
    return value


def _strs(args: dict[str, Any], key: str) -> list[str] | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _invalid(f"`{key}` must be a list of strings")
    return list(value)


def _memory(args: dict[str, Any]) -> str:
    value = _str(args, "memory", required=True)
    assert value is not None  # noqa: S101 - required=True never returns None
    return value


def _put(body: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        body[key] = value


def memory_list(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Entry points, or one memory with its readable children."""
    memory = _str(args, "memory")
    if memory is None:
        return env.service.list_memories(env.caller, granted=True)
    node = env.service.get_memory(env.caller, memory)
    children = env.service.list_memories(env.caller, parent=memory)
    return {"memory": node, "children": children.get("data", [])}


def memory_recall(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Recall over the memory's readable subtree; ``limit`` 1–50 (the schema refuses others)."""
    body: dict[str, Any] = {}
    _put(body, "query", _str(args, "query"))
    _put(body, "text", _str(args, "text"))
    _put(body, "filters", _obj(args, "filters"))
    _put(body, "types", _strs(args, "types"))
    _put(body, "depth", _int(args, "depth"))
    _put(body, "include", _strs(args, "include"))
    _put(body, "limit", _int(args, "limit"))
    _put(body, "x.pal.provenance", _obj(args, "provenance"))
    return env.service.recall(env.caller, _memory(args), body)


def memory_graph(env: ToolEnv, args: dict[str, Any]) -> Any:
    """The graph around a record (or the memory), at most 60 nodes."""
    body: dict[str, Any] = {"limit": GRAPH_LIMIT}
    _put(body, "around", _str(args, "record"))
    _put(body, "hops", _int(args, "hops"))
    _put(body, "types", _strs(args, "types"))
    _put(body, "include", _strs(args, "include"))
    return env.service.graph(env.caller, _memory(args), body)


def memory_get(env: ToolEnv, args: dict[str, Any]) -> Any:
    """One record; with ``history`` its versions, oldest first."""
    memory, record = _memory(args), _str(args, "record", required=True)
    assert record is not None  # noqa: S101
    if args.get("history") is True:
        return env.service.record_history(env.caller, memory, record)
    return env.service.get_record(env.caller, memory, record, include=_strs(args, "include"))


def _default_memory(env: ToolEnv) -> str:
    if env.default_memory:
        return env.default_memory
    try:
        harness = env.service.harness_memories(env.caller, env.caller.member.id)
    except PalError:
        harness = {}
    default = harness.get("default_memory_id") if isinstance(harness, dict) else None
    if isinstance(default, str) and default:
        return default
    raise _invalid("you have no default memory: pass `memory` (see memory_list)")


def memory_remember(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Write a record (to the default memory when none is named)."""
    memory = _str(args, "memory") or _default_memory(env)
    kind = _str(args, "type") or "fact"
    if kind not in REMEMBER_TYPES:
        raise _invalid("`type` must be one of " + ", ".join(REMEMBER_TYPES))
    body: dict[str, Any] = {"type": kind}
    _put(body, "title", _str(args, "title"))
    _put(body, "content", _str(args, "content"))
    _put(body, "attributes", _obj(args, "attributes"))
    refs = args.get("references")
    if refs is not None:
        if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
            raise _invalid("`references` must be a list of {rel, record_id, memory_id?}")
        body["references"] = refs
    if "title" not in body and "content" not in body:
        raise _invalid("give a `title` or `content`")
    return env.service.remember(env.caller, memory, body)


def memory_revise(env: ToolEnv, args: dict[str, Any]) -> Any:
    """A new version; the reason is kept in ``attributes.revision_reason`` (≤ 500 chars)."""
    memory, record = _memory(args), _str(args, "record", required=True)
    reason = _str(args, "reason", required=True)
    assert record is not None and reason is not None  # noqa: S101
    if len(reason) > MAX_REASON_CHARS:
        raise _invalid(f"`reason` must be at most {MAX_REASON_CHARS} characters")
    attributes = _obj(args, "attributes")
    if attributes is None:
        current = env.service.get_record(env.caller, memory, record)
        attributes = dict(current.get("attributes") or {})
    body: dict[str, Any] = {"attributes": {**attributes, "revision_reason": reason}}
    _put(body, "title", _str(args, "title"))
    _put(body, "content", _str(args, "content"))
    return env.service.revise(env.caller, memory, record, body)


def memory_forget(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Mark a record forgotten; the trace stays in history."""
    record = _str(args, "record", required=True)
    assert record is not None  # noqa: S101
    return env.service.forget(env.caller, _memory(args), record)


def memory_run_query(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Run a named query."""
    name = _str(args, "name", required=True)
    assert name is not None  # noqa: S101
    return env.service.run_query(env.caller, _memory(args), name,
                                 {"params": _obj(args, "params") or {}})


def memory_operate(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Run a type operation on a record."""
    record = _str(args, "record", required=True)
    operation = _str(args, "operation", required=True)
    assert record is not None and operation is not None  # noqa: S101
    return env.service.operate(env.caller, _memory(args), record, operation,
                               _obj(args, "input") or {})


def memory_query(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Run a free query in an offered language."""
    body: dict[str, Any] = {"statement": _str(args, "statement", required=True),
                            "params": _obj(args, "params") or {}}
    _put(body, "language", _str(args, "language"))
    return env.service.free_query(env.caller, _memory(args), body)


def _req(args: dict[str, Any], key: str) -> str:
    value = _str(args, key, required=True)
    assert value is not None  # noqa: S101 - required=True never returns None
    return value


def _full_ref(name: str) -> str:
    return name if name.startswith("refs/") else f"refs/{name}"


def memory_status(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Refs and open proposals of a memory's history."""
    project, flow = _req(args, "project"), env.git()
    proposals = flow.list_proposals(env.principal, project)
    return {"project": project, "refs": flow.git.list_refs(env.principal, project),
            "open_proposals": [p for p in proposals if p.get("status") in ("open", "approved")]}


def memory_ref_list(env: ToolEnv, args: dict[str, Any]) -> Any:
    """The refs of a memory's history."""
    return {"refs": env.git().git.list_refs(env.principal, _req(args, "project"))}


def memory_log(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Changesets reachable from a ref, newest first."""
    return env.git().git.log(env.principal, _req(args, "project"), _full_ref(_req(args, "ref")),
                             _int(args, "limit") or 20)


def memory_show(env: ToolEnv, args: dict[str, Any]) -> Any:
    """One changeset (integrity verified on read)."""
    return env.git().git.get_changeset(env.principal, _req(args, "id"))


def memory_diff(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Semantic diff of a changeset against a base."""
    body: dict[str, Any] = {}
    _put(body, "base_changeset_id", _str(args, "base_changeset_id"))
    return env.git().diff(env.principal, _req(args, "target_changeset_id"), body)


def memory_context_at(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Accepted memory at a ref, or at a historical head reachable from it."""
    body: dict[str, Any] = {"ref_name": _full_ref(_req(args, "ref"))}
    _put(body, "head_changeset_id", _str(args, "head"))
    _put(body, "query", _str(args, "query"))
    _put(body, "limit", _int(args, "limit"))
    return env.git().git.context_at(env.principal, _req(args, "project"), body)


def memory_branch_create(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Create an owned ref at a changeset."""
    body = {"ref_name": _full_ref(_req(args, "ref_name")),
            "head_changeset_id": _req(args, "head_changeset_id")}
    return env.git().git.create_branch(env.principal, _req(args, "project"), body)


def memory_changeset_create(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Commit operations to an owned ref (compare-and-swap on ``expected_head``)."""
    ops = args.get("ops")
    if not isinstance(ops, list):
        raise _invalid("`ops` must be a list of operations")
    body: dict[str, Any] = {"project_id": _req(args, "project"),
                            "ref_name": _full_ref(_req(args, "ref")),
                            "message": _req(args, "message"),
                            "idempotency_key": _req(args, "idempotency_key"), "ops": ops}
    _put(body, "expected_head", _str(args, "expected_head"))
    _put(body, "parent_ids", _strs(args, "parent_ids"))
    changeset, _ = env.git().git.create_changeset(env.principal, body)
    return changeset


def memory_merge_propose(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Open a proposal pinned to ``head_changeset_id``."""
    project, flow = _req(args, "project"), env.git()
    head = _req(args, "head_changeset_id")
    source = _str(args, "source_ref")
    if source is None:
        owned = [r for r in flow.git.list_refs(env.principal, project)
                 if r.get("created_by_principal") == env.principal
                 and r.get("head_changeset_id") == head]
        if len(owned) != 1:
            raise _invalid("name `source_ref`: none or several of your refs have that head")
        source = str(owned[0]["ref_name"])
    body: dict[str, Any] = {"source_ref": _full_ref(source),
                            "target_ref": _full_ref(_req(args, "target_ref")),
                            "head_changeset_id": head, "message": _req(args, "message"),
                            "idempotency_key": _req(args, "idempotency_key")}
    _put(body, "base_changeset_id", _str(args, "base_changeset_id"))
    _put(body, "selected_ops", _strs(args, "selected_ops"))
    proposal, _ = flow.propose(env.principal, project, body)
    return proposal


def memory_merge_review(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Review someone else's proposal (self-review is refused by the flow)."""
    body: dict[str, Any] = {"verdict": _req(args, "verdict")}
    _put(body, "comment", _str(args, "comment"))
    _put(body, "severity", _str(args, "severity"))
    return env.git().review(env.principal, _req(args, "proposal_id"), body)


def memory_merge(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Sign the merge authorization and advance the protected ref, as one tool call."""
    flow, proposal_id = env.git(), _req(args, "proposal_id")
    doc = flow.get_proposal(env.principal, proposal_id)
    approvals = [r for r in doc.get("reviews", []) if r.get("verdict") == "approve"]
    mine = [r for r in approvals if r.get("reviewer_principal") == env.principal]
    chosen = (mine or approvals)[-1:] if approvals else []
    body = {"reviewer_principal": chosen[0]["reviewer_principal"]} if chosen else {}
    request = flow.authorize(env.principal, proposal_id, body)
    strategy = request.pop("strategy", None)
    merged = flow.merge(env.principal, str(doc["project_id"]), request)
    return {"merged": merged, "strategy": strategy}


def memory_merge_cancel(env: ToolEnv, args: dict[str, Any]) -> Any:
    """Cancel your own proposal."""
    return env.git().cancel(env.principal, _req(args, "proposal_id"))


# ----- repository memory (hn version 0; stdio inside a Git repository) ---------------------

def _repository(env: ToolEnv) -> Any:
    # Imported here: the service-only server never loads pygit2 or the hn index.
    from palimpsest.hn import store  # noqa: PLC0415

    if env.repo is None:
        raise InvalidInput("repository memory is not available here", code="not-a-repository")
    return store.open_repository(env.repo)


def _recall_page(env: ToolEnv, args: dict[str, Any], grep: bool) -> render.Verbatim:
    from palimpsest.hn import reading, recall  # noqa: PLC0415

    repo = _repository(env)
    body = {k: v for k, v in args.items() if k not in ("pattern", "ignore_case")}
    request = reading.request_at(repo, body)
    if grep:
        pattern = _str(args, "pattern", required=True) or ""
        ignore_case = args.get("ignore_case", False)
        if not isinstance(ignore_case, bool):
            raise _invalid("`ignore_case` must be a boolean")
        result = recall.grep(repo, request, pattern.encode("utf-8", "surrogatepass"),
                             ignore_case=ignore_case)
    else:
        result = recall.recall(repo, request)
    envelope = result.to_json()
    writers = {"writers": reading.writers_of(repo, request, envelope)}
    return render.verbatim(envelope, encode(writers))


def repo_memory_recall(env: ToolEnv, args: dict[str, Any]) -> Any:
    """``pal memory recall --json`` for the request; then the signed writer of each memory."""
    return _recall_page(env, args, grep=False)


def repo_memory_grep(env: ToolEnv, args: dict[str, Any]) -> Any:
    """``pal memory grep --json`` for the pattern; then the signed writer of each memory."""
    return _recall_page(env, args, grep=True)


def repo_memory_prime(env: ToolEnv, args: dict[str, Any]) -> Any:
    """``pal memory prime``: the fenced text, the JSON inside it that of ``--json``."""
    from palimpsest.hn import store  # noqa: PLC0415
    from palimpsest.hn.prime import prime  # noqa: PLC0415

    repo = _repository(env)
    budget = _int(args, "budget") or PRIME_DEFAULT_BUDGET
    at = store.resolve_commit(repo, _str(args, "atCommit") or "HEAD")
    return render.verbatim(prime(repo, at, budget))


def _document(args: dict[str, Any]) -> bytes:
    """The request document as the bytes ``--input`` would read: its text as given (lone
    surrogates kept, so the strict decoder refuses them as invalid UTF-8), or the object
    re-encoded (then the decoder's rules apply to it the same way)."""
    value = args.get("request")
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    raise _invalid("`request` must be the request document: an object or its JSON text")


def _repo_write(operation: str) -> Handler:
    def handler(env: ToolEnv, args: dict[str, Any]) -> Any:
        """The request through the CLI's ``--input`` path; the answer its command result."""
        from palimpsest.hn.show import command_result_json  # noqa: PLC0415
        from palimpsest.hn.submit import submit  # noqa: PLC0415

        if not env.repo_writes:  # the server offers these only with the flag; belt and braces
            raise InvalidInput(f"repository writes are off: start `pal mcp {WRITE_FLAG}`",
                               code="repo-writes-off")
        context = {key: value for key in ("target", "at", "applies")
                   if (value := _str(args, key)) is not None}
        memory = submit(_repository(env), operation, _document(args), **context)
        return render.verbatim(command_result_json(memory))

    return handler


def repo_memory_show(env: ToolEnv, args: dict[str, Any]) -> Any:
    """``pal memory show --json``: the envelope carries the writer (actor, actorName)."""
    from palimpsest.hn import reading  # noqa: PLC0415
    from palimpsest.hn.show import show_json  # noqa: PLC0415

    lookup = _req(args, "memory")
    at = _str(args, "atCommit") or "HEAD"
    found, projection = reading.show_at(_repository(env), lookup, at)
    return render.verbatim(show_json(found, projection))


HANDLERS: dict[str, Handler] = {
    "memory_list": memory_list,
    "memory_recall": memory_recall,
    "memory_graph": memory_graph,
    "memory_get": memory_get,
    "memory_remember": memory_remember,
    "memory_revise": memory_revise,
    "memory_forget": memory_forget,
    "memory_run_query": memory_run_query,
    "memory_operate": memory_operate,
    "memory_query": memory_query,
    "memory_status": memory_status,
    "memory_ref_list": memory_ref_list,
    "memory_log": memory_log,
    "memory_show": memory_show,
    "memory_diff": memory_diff,
    "memory_context_at": memory_context_at,
    "memory_branch_create": memory_branch_create,
    "memory_changeset_create": memory_changeset_create,
    "memory_merge_propose": memory_merge_propose,
    "memory_merge_review": memory_merge_review,
    "memory_merge": memory_merge,
    "memory_merge_cancel": memory_merge_cancel,
    "repo_memory_recall": repo_memory_recall,
    "repo_memory_grep": repo_memory_grep,
    "repo_memory_show": repo_memory_show,
    "repo_memory_prime": repo_memory_prime,
    **{f"repo_memory_{op}": _repo_write(op)
       for op in ("record", "handoff", "supersede", "retract", "challenge")},
}


def _privileged_somewhere(env: ToolEnv, privilege: str) -> bool:
    listing = env.service.list_memories(env.caller, granted=True, limit=200)
    return any(privilege in (m.get("privileges") or []) for m in listing.get("data", []))


def compute_offers(env: ToolEnv, *, repo: bool = False) -> Offers:
    """What this caller is offered: writes where it may write, queries/operations/languages
    where the provider declares them. Each probe that fails counts as "not offered". Without a
    service (repository-only mode) only the repository tools."""
    if env.facade is None:
        return Offers(service=False, repo=repo, repo_writes=repo and env.repo_writes)
    def probe(fn: Callable[[], bool]) -> bool:
        try:
            return fn()
        except PalError:
            return False

    def provider_doc() -> dict[str, Any]:
        data = env.service.providers(env.caller).get("data") or []
        return data[0] if data and isinstance(data[0], dict) else {}

    def languages() -> tuple[str, ...]:
        try:
            free = (provider_doc().get("queries") or {}).get("free") or {}
        except PalError:
            return ()
        langs = free.get("languages") if isinstance(free, dict) else None
        return tuple(x for x in langs if isinstance(x, str)) if isinstance(langs, list) else ()

    def operations() -> bool:
        kinds = env.service.types(env.caller).get("data") or []
        return any(isinstance(k, dict) and k.get("operations") for k in kinds)

    return Offers(
        writes=probe(lambda: _privileged_somewhere(env, "write")),
        queries=probe(lambda: bool((provider_doc().get("queries") or {}).get("named"))),
        operations=probe(operations),
        languages=languages(),
        git=env.flow is not None,
        repo=repo,
        repo_writes=repo and env.repo_writes,
    )
