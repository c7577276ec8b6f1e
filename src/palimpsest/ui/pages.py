"""The review desk's pages: each handler gathers its data in one trip to the service thread
(through :class:`~palimpsest.ui.facade.DeskService`) and renders one template.

Reads are ``GET`` pages; the only writes are the proposal actions in :func:`act` (review,
merge, cancel), each behind the origin and CSRF checks of :meth:`Desk.form`. Query parameters
are validated here before they reach the service; anything the service refuses comes back as
its own words (:meth:`Desk.error`).
"""

from __future__ import annotations

from importlib import resources
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from palimpsest.errors import InvalidInput, PalError
from palimpsest.service.model import Wire
from palimpsest.ui.desk import Desk, Refused, Visit, status_for
from palimpsest.ui.facade import OPEN, ProposalView
from palimpsest.ui.render import FILE_CSP, SECURITY_HEADERS, href
from palimpsest.ui.worddiff import fields_diff

CORE_TYPES = ("episode", "fact", "note", "procedure", "link", "entity")
STATUSES = ("active", "superseded", "forgotten", "all")
VERDICTS = {"approve": "Approve", "request_changes": "Request changes", "reject": "Reject"}
DONE = {"approve": "Your approval is recorded.", "request_changes": "Your request for "
        "changes is recorded.", "reject": "Your rejection is recorded.",
        "merge": "Merged: refs/shared/main moved to the proposal.",
        "cancel": "The proposal is canceled."}
DEFAULT_BUDGET = 4000
_STATIC = ("desk.css",)


def static_asset(name: str) -> bytes | None:
    """A stylesheet shipped in the package, or ``None``."""
    if name not in _STATIC:
        return None
    return (resources.files("palimpsest.ui") / "static" / name).read_bytes()


def _param(request: Request, name: str, choices: tuple[str, ...] | None = None,
           size: int = 1000) -> str:
    value = request.query_params.get(name, "")
    if len(value) > size or (choices is not None and value and value not in choices):
        raise InvalidInput(f"{name} is not one of the offered values", code="memory_invalid")
    return value


# --- the tree ---------------------------------------------------------------------------------
async def tree(desk: Desk, request: Request, visit: Visit) -> Response:
    """Entry points of the caller's tree and the size of the review queue."""
    caller = visit.caller

    def gather() -> dict[str, Any]:
        roots = desk.calls.roots(caller)
        counts = desk.calls.open_counts(caller, [m["id"] for m in roots])
        return {"roots": [(m, counts.get(m["id"], 0)) for m in roots],
                "queued": sum(len(items) for _, items in desk.calls.queue(caller))}

    return desk.html("tree.html", 200, visit, **await desk.run(gather))


async def memory(desk: Desk, request: Request, visit: Visit) -> Response:
    """One memory: where it sits, its counts and privileges, its children."""
    caller, mid = visit.caller, request.path_params["mid"]

    def gather() -> dict[str, Any]:
        node = desk.calls.memory(caller, mid)
        kids = desk.calls.children(caller, mid)
        counts = desk.calls.open_counts(caller, [mid, *(k["id"] for k in kids)])
        return {"node": node, "ancestors": desk.calls.ancestors(caller, node),
                "children": [(k, counts.get(k["id"], 0)) for k in kids],
                "open": counts.get(mid, 0)}

    return desk.html("memory.html", 200, visit, **await desk.run(gather))


# --- records ----------------------------------------------------------------------------------
async def records(desk: Desk, request: Request, visit: Visit) -> Response:
    """Records with type, writer and status filters, or a recall over the subtree."""
    caller, mid = visit.caller, request.path_params["mid"]
    kind = _param(request, "type", CORE_TYPES)
    status = _param(request, "status", STATUSES) or "active"
    writer = _param(request, "writer", size=300)
    words = _param(request, "q", size=2000).strip()
    cursor = _param(request, "cursor", size=500) or None

    def gather() -> dict[str, Any]:
        node = desk.calls.memory(caller, mid)
        out: dict[str, Any] = {"node": node, "recall": None, "next": None}
        if words:
            answer = desk.calls.recall(caller, mid, words, [kind] if kind else None)
            out["recall"] = answer
            out["served"] = desk.calls.served_signals()
            out["matched"] = sorted({s for r in answer["results"] for s in r.get("why", [])})
            rows = [r["record"] for r in answer["results"]]
        else:
            page = desk.calls.records(caller, mid, type=kind or None,
                                      include="active" if status == "active" else "all",
                                      cursor=cursor)
            rows = list(page["data"])
            out["next"] = page.get("next")
        out["writers"] = sorted({w for w in (_writer(r) for r in rows) if w})
        out["rows"] = [r for r in rows
                       if (status in ("all", "active") or r.get("status") == status)
                       and (not writer or _writer(r) == writer)]
        return out

    data = await desk.run(gather)
    return desk.html("records.html", 200, visit, type=kind, status=status, writer=writer,
                     q=words, types=CORE_TYPES, statuses=STATUSES, cursor=cursor or "", **data)


def _writer(record: Wire) -> str:
    who = record.get("written_by") or {}
    return f"{who.get('kind', '')}:{who.get('id', '')}" if who.get("id") else ""


async def record(desk: Desk, request: Request, visit: Visit) -> Response:
    """A record: parts, references, writer, version history and a word diff of two versions."""
    caller, mid, rid = visit.caller, request.path_params["mid"], request.path_params["rid"]

    def gather() -> dict[str, Any]:
        return {"node": desk.calls.memory(caller, mid),
                "record": desk.calls.record(caller, mid, rid),
                "versions": desk.calls.history(caller, mid, rid)}

    data = await desk.run(gather)
    versions: list[Wire] = data["versions"]
    numbers = [int(v["version"]) for v in versions]
    old = _version(request, "from", numbers, numbers[-2] if len(numbers) > 1 else numbers[0])
    new = _version(request, "to", numbers, numbers[-1])
    by_number = {int(v["version"]): v for v in versions}
    diff = fields_diff(_diffable(by_number[old]), _diffable(by_number[new]))
    return desk.html("record.html", 200, visit, old=old, new=new, numbers=numbers,
                     diff=diff, **data)


def _version(request: Request, name: str, numbers: list[int], default: int) -> int:
    raw = request.query_params.get(name, "")
    if not raw:
        return default
    if not raw.isdigit() or len(raw) > 9 or int(raw) not in numbers:
        raise InvalidInput(f"{name} must name a version of this record", code="memory_invalid")
    return int(raw)


def _diffable(version: Wire) -> dict[str, Any]:
    """The fields of one version that a reader compares, by name."""
    out: dict[str, Any] = {"title": version.get("title"), "type": version.get("type")}
    for i, part in enumerate(version.get("content", [])):
        if part.get("type") == "text":
            out[f"content[{i}]"] = part.get("text", "")
        else:
            out[f"content[{i}]"] = {k: part[k] for k in ("type", "file", "text") if k in part}
    for name in ("attributes", "references"):
        if version.get(name):
            out[name] = version[name]
    valid = {k: v for k, v in (version.get("time") or {}).items()
             if k in ("valid_from", "valid_to") and v}
    if valid:
        out["time"] = valid
    return {k: v for k, v in out.items() if v is not None}


async def download(desk: Desk, request: Request, visit: Visit) -> Response:
    """A file part's bytes as an attachment: never rendered inline, sniffed or scripted."""
    caller, mid, rid = visit.caller, request.path_params["mid"], request.path_params["rid"]
    index = int(request.path_params["index"])
    blob = await desk.run(lambda: desk.calls.content(caller, mid, rid, index))
    headers = {**SECURITY_HEADERS, "content-security-policy": FILE_CSP,
               "content-disposition": f"attachment; filename=\"part-{index}\"; "
                                      f"filename*=UTF-8''{_filename(blob.name)}"}
    return Response(blob.data, media_type="application/octet-stream", headers=headers)


def _filename(name: str) -> str:
    return quote(name.replace("/", "_").replace("\\", "_")[:200], safe="") or "file"


# --- review -----------------------------------------------------------------------------------
async def queue(desk: Desk, request: Request, visit: Visit) -> Response:
    """Open proposals across every memory the caller may read."""
    caller = visit.caller
    data = await desk.run(lambda: desk.calls.queue(caller))
    return desk.html("queue.html", 200, visit, groups=data)


async def proposals(desk: Desk, request: Request, visit: Visit) -> Response:
    """Every proposal of one memory, open ones first."""
    caller, mid = visit.caller, request.path_params["mid"]

    def gather() -> dict[str, Any]:
        items = desk.calls.proposals(caller, mid)
        return {"node": desk.calls.memory(caller, mid),
                "items": sorted(items, key=lambda p: p["status"] not in OPEN)}

    return desk.html("proposals.html", 200, visit, **await desk.run(gather))


async def proposal(desk: Desk, request: Request, visit: Visit, *, status: int = 200,
                   problem: str = "") -> Response:
    """A proposal with its changesets, diffs, conflicts, duplicates, reviews and actions."""
    caller, pid = visit.caller, request.path_params["pid"]

    def gather() -> dict[str, Any]:
        view = desk.calls.proposal_view(caller, pid)
        return {"view": view,
                "node": desk.calls.memory(caller, view.dossier.proposal["project_id"])}

    data = await desk.run(gather)
    view: ProposalView = data["view"]
    done = DONE.get(request.query_params.get("done", ""), "")
    return desk.html("proposal.html", status, visit, verdicts=VERDICTS, done=done,
                     problem=problem, independence=_independence(view), open=OPEN,
                     me=f"member:{caller.member.id}", **data)


def _independence(view: ProposalView) -> dict[str, Any]:
    """The reviewer-independence badge: approvals bound to this snapshot by principals other
    than the originator, and any blocking verdict."""
    doc = view.dossier.proposal
    reviews = doc["reviews"]
    approvals = [r for r in reviews if r["verdict"] == "approve"
                 and r["proposal_digest"] == doc["proposal_digest"]
                 and r["reviewer_principal"] != doc["originator_principal"]]
    blocking = [r for r in reviews if r["verdict"] != "approve"]
    if blocking:
        state = "blocked"
    elif approvals:
        state = "independent"
    else:
        state = "awaiting"
    return {"state": state, "approvals": approvals, "blocking": blocking}


async def act(desk: Desk, request: Request, visit: Visit) -> Response:
    """Review (with a required reason), merge or cancel; the service decides."""
    pid, action = request.path_params["pid"], request.path_params["action"]
    if action not in ("review", "merge", "cancel"):
        raise Refused(404, "no such action")
    fields = await desk.form(request, visit)
    caller = visit.caller
    done = action
    try:
        if action == "review":
            verdict = fields.get("verdict", "")
            reason = fields.get("reason", "").strip()
            if verdict not in VERDICTS:
                raise InvalidInput("choose a verdict: approve, request changes or reject",
                                   code="invalid-verdict")
            if not reason:
                raise InvalidInput("a reason is required for every verdict",
                                   code="missing-field", hint="say why in the reason field")
            await desk.run(lambda: desk.calls.review(caller, pid, verdict, reason))
            done = verdict
        elif action == "merge":
            await desk.run(lambda: desk.calls.merge(caller, pid))
        else:
            await desk.run(lambda: desk.calls.cancel(caller, pid))
    except PalError as exc:
        return await proposal(desk, request, visit, status=status_for(exc), problem=str(exc))
    return RedirectResponse(href("proposals", pid, done=done), status_code=303,
                            headers=dict(SECURITY_HEADERS))


# --- prime and grants -------------------------------------------------------------------------
async def prime(desk: Desk, request: Request, visit: Visit) -> Response:
    """What an agent granted this memory receives at session start, before and after a
    pending merge, within a chosen budget."""
    caller, mid = visit.caller, request.path_params["mid"]
    raw = _param(request, "budget", size=7) or str(DEFAULT_BUDGET)
    if not raw.isdigit() or not 1 <= int(raw) <= 1_000_000:
        raise InvalidInput("budget must be a whole number of tokens from 1 to 1000000",
                           code="memory_invalid")
    budget = int(raw)
    chosen = _param(request, "proposal", size=200) or None

    def gather() -> dict[str, Any]:
        pending = desk.calls.proposals(caller, mid, open_only=True)
        out = {"node": desk.calls.memory(caller, mid), "pending": pending, "budget": budget,
               "now": desk.calls.prime(caller, mid, budget), "after": None, "proposal": None}
        if chosen:
            preview = desk.calls.prime_preview(caller, mid, budget, chosen)
            out["now"], out["after"] = preview["now"], preview["after"]
            out["proposal"] = next((p for p in pending if p["proposal_id"] == chosen), None)
        return out

    return desk.html("prime.html", 200, visit, chosen=chosen or "", **await desk.run(gather))


async def grants(desk: Desk, request: Request, visit: Visit) -> Response:
    """Who may read, write, create or delete here (holders of delete only)."""
    caller, mid = visit.caller, request.path_params["mid"]
    node, items, nodes = await desk.run(lambda: desk.calls.grants(caller, mid))
    names = {n["id"]: n for n in nodes}
    cutoff = next((n for n in nodes if n.get("restricted")), None)
    return desk.html("grants.html", 200, visit, node=node, grants=items, names=names,
                     cutoff=cutoff)


__all__ = ["act", "download", "grants", "memory", "prime", "proposal", "proposals", "queue",
           "record", "records", "static_asset", "tree"]
