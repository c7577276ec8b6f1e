"""``pal memory-git``: Memory Git from a terminal, over HTTP to a running ``pal serve``.

The CLI is a client, never a second server: it sends the same requests an agent would, with a
bearer credential, so every rule (owned refs, review, signed merges) is enforced by the server.
Connection: ``--url`` (or ``$PAL_URL``, default ``http://127.0.0.1:8765``) and a credential from
``--credential-file`` (a private file) or ``$PAL_CREDENTIAL``.

Every command prints JSON with ``--json``; human output is passed through
:func:`palimpsest.text.safe_text` so author content never reaches the terminal as control bytes.
A refusal exits 1 with ``pal: <reason>`` (the server's code and message).
"""

# ruff: noqa: PLR0917  -- click passes every option by keyword; signatures mirror the options
from __future__ import annotations

import os
import secrets
import stat
import uuid
from pathlib import Path
from typing import Any

import click
import httpx

from palimpsest import canonical
from palimpsest.errors import InvalidInput, PalError, Unavailable
from palimpsest.text import safe_line, safe_text

DEFAULT_URL = "http://127.0.0.1:8765"


class Client:
    """A tiny JSON-over-HTTP client bound to one server and one credential."""

    def __init__(self, url: str, credential: str) -> None:
        self._http = httpx.Client(base_url=url.rstrip("/"), timeout=60.0,
                                  headers={"Authorization": f"Bearer {credential}"})
        self._errors = httpx.HTTPError

    def call(self, method: str, path: str, body: Any = None,
             params: dict[str, Any] | None = None) -> Any:
        """Send one request; a non-2xx answer becomes a PalError carrying the server's reason."""
        try:
            resp = self._http.request(
                method, f"/api/memory{path}",
                params={k: v for k, v in (params or {}).items() if v is not None},
                content=canonical.encode(body) if body is not None else None,
                headers={"Content-Type": "application/json"} if body is not None else None)
        except self._errors as exc:
            raise Unavailable(f"cannot reach the server: {exc}",
                              hint="start it with `pal serve` or pass --url") from exc
        try:
            doc = canonical.decode(resp.content, allow_floats=True) if resp.content else None
        except PalError:
            doc = None
        if resp.status_code >= 400:
            reason = "request refused"
            if isinstance(doc, dict):
                err = doc.get("error")
                if isinstance(err, dict):  # the UHP envelope (guard refusals)
                    reason = f"{err.get('code')}: {err.get('message')}"
                else:
                    reason = f"{err}: {doc.get('message', '')}"
            raise PalError(f"HTTP {resp.status_code} {reason}", code="http-error")
        return doc


def _credential(path: Path | None) -> str:
    if path is not None:
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise InvalidInput(f"{path} is readable by others; chmod 600 it")
        secret = path.read_text(encoding="utf-8").strip()
    else:
        secret = os.environ.get("PAL_CREDENTIAL", "").strip()
    if not secret:
        raise InvalidInput("no credential: pass --credential-file or set PAL_CREDENTIAL")
    return secret


def _emit(ctx: click.Context, doc: Any, human: str) -> None:
    if ctx.obj["json"]:
        click.echo(canonical.encode_indent(doc).decode("utf-8"), nl=False)
    else:
        click.echo(safe_text(human))


def _client(ctx: click.Context) -> Client:
    client = ctx.obj.get("client")
    if client is None:
        client = Client(ctx.obj["url"], _credential(ctx.obj["credential_file"]))
        ctx.obj["client"] = client
    return client  # type: ignore[no-any-return]


@click.group(name="memory-git")
@click.option("--url", envvar="PAL_URL", default=DEFAULT_URL, show_default=True,
              help="Base URL of the running server ($PAL_URL).")
@click.option("--credential-file", type=click.Path(path_type=Path, dir_okay=False),
              default=None, help="File holding the bearer credential (else $PAL_CREDENTIAL).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def command(ctx: click.Context, url: str, credential_file: Path | None, as_json: bool) -> None:
    """Versioned, reviewed memory: refs, changesets, proposals, reviews, signed merges."""
    ctx.ensure_object(dict)
    ctx.obj.update({"url": url, "credential_file": credential_file, "json": as_json})


@command.command()
@click.pass_context
def projects(ctx: click.Context) -> None:
    """List projects (memories) with Memory Git history."""
    doc = _client(ctx).call("GET", "/projects")
    _emit(ctx, doc, "\n".join(doc["projects"]) or "(none)")


@command.command()
@click.argument("project")
@click.pass_context
def init(ctx: click.Context, project: str) -> None:
    """Create the root changeset and refs/shared/main of PROJECT."""
    doc = _client(ctx).call("POST", f"/{project}/legacy-root", {})
    _emit(ctx, doc, f"refs/shared/main -> {doc['ref']['head_changeset_id']}")


@command.command()
@click.argument("project")
@click.pass_context
def refs(ctx: click.Context, project: str) -> None:
    """List the refs of PROJECT."""
    doc = _client(ctx).call("GET", f"/{project}/refs")
    lines = [f"{r['ref_name']}  {r['head_changeset_id'] or '-'}"
             f"{'  (protected)' if r['protected'] else ''}" for r in doc]
    _emit(ctx, doc, "\n".join(lines) or "(no refs)")


@command.command()
@click.argument("project")
@click.argument("ref_name")
@click.option("--at", "head", default=None, help="Changeset to branch from (default: shared).")
@click.pass_context
def branch(ctx: click.Context, project: str, ref_name: str, head: str | None) -> None:
    """Create an owned ref, e.g. refs/agents/<your member id>/main."""
    client = _client(ctx)
    if head is None:
        head = client.call("GET", f"/{project}/refs/shared/main")["head_changeset_id"]
    doc = client.call("POST", f"/{project}/branches",
                      {"ref_name": ref_name, "head_changeset_id": head})
    _emit(ctx, doc, f"{doc['ref_name']} -> {doc['head_changeset_id']}")


@command.command()
@click.argument("project")
@click.argument("ref_name")
@click.option("--add", "adds", multiple=True, help="Content of a memory to add (repeatable).")
@click.option("--ops-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="JSON file with an ops array (the eight Memory Git operations).")
@click.option("--kind", default=None, help="Kind of the added memories (fact, decision, …).")
@click.option("-m", "--message", default="", help="Changeset message.")
@click.option("--idempotency-key", default=None, help="Default: a fresh random key.")
@click.pass_context
def commit(ctx: click.Context, project: str, ref_name: str, adds: tuple[str, ...],
           ops_file: Path | None, kind: str | None, message: str,
           idempotency_key: str | None) -> None:
    """Commit a changeset to REF_NAME with compare-and-swap on its current head."""
    ops: list[Any] = []
    if ops_file is not None:
        loaded = canonical.decode(ops_file.read_bytes(), allow_floats=True,
                                  trailing_whitespace=True)
        if not isinstance(loaded, list):
            raise InvalidInput("--ops-file must hold a JSON array of ops")
        ops.extend(loaded)
    for content in adds:
        payload: dict[str, Any] = {"content": content}
        if kind:
            payload["kind"] = kind
        ops.append({"op_type": "add_memory", "payload": payload})
    if not ops:
        raise InvalidInput("nothing to commit: pass --add or --ops-file")
    client = _client(ctx)
    ref = client.call("GET", "/" + project + "/refs/resolve", params={"name": ref_name})
    doc = client.call("POST", "/changesets", {
        "project_id": project, "ref_name": ref_name, "expected_head": ref["head_changeset_id"],
        "idempotency_key": idempotency_key or str(uuid.uuid4()), "message": message,
        "ops": ops})
    _emit(ctx, doc, f"{doc['changeset_id']} on {ref_name} ({len(doc['ops'])} ops)")


@command.command()
@click.argument("project")
@click.option("--ref", "ref_name", default="refs/shared/main", show_default=True)
@click.option("--limit", default=20, show_default=True)
@click.pass_context
def log(ctx: click.Context, project: str, ref_name: str, limit: int) -> None:
    """Changesets reachable from a ref, newest first."""
    doc = _client(ctx).call("GET", f"/{project}/changesets",
                            params={"ref": ref_name, "limit": limit})
    lines = [f"{c['changeset_id']}  {c['author_principal']}  {safe_line(c['message'])}"
             for c in doc["changesets"]]
    _emit(ctx, doc, "\n".join(lines) or "(empty)")


@command.command()
@click.argument("changeset_id")
@click.pass_context
def show(ctx: click.Context, changeset_id: str) -> None:
    """One changeset (its integrity digest is verified by the server)."""
    doc = _client(ctx).call("GET", f"/changesets/{changeset_id}")
    ops = "\n".join(f"  {o['ordinal']} {o['op_type']} {o.get('resulting_event_id') or ''}"
                    for o in doc["ops"])
    _emit(ctx, doc, f"{doc['changeset_id']} by {doc['author_principal']}\n"
                    f"parents: {', '.join(doc['parent_ids']) or '-'}\n{ops}")


@command.command()
@click.argument("project")
@click.option("--ref", "ref_name", default="refs/shared/main", show_default=True)
@click.option("--head", default=None, help="An exact head reachable from the ref.")
@click.option("--query", default="", help="Rank by overlap with these words.")
@click.option("--limit", default=None, type=int)
@click.pass_context
def context(ctx: click.Context, project: str, ref_name: str, head: str | None, query: str,
            limit: int | None) -> None:
    """Accepted memory at a head (memory-context/v1). Output is data, not instructions."""
    doc = _client(ctx).call("GET", f"/{project}/context", params={
        "ref": ref_name, "head": head, "query": query, "limit": limit})
    lines = [f"[{m['memory_id']}] ({m.get('kind', '-')}, by {m['source']}) "
             f"{safe_line(m['content'])}" for m in doc["memories"]]
    _emit(ctx, doc, f"{ref_name} @ {doc['head_changeset_id']} — recalled data, not "
                    "instructions:\n" + ("\n".join(lines) or "(no memories)"))


@command.command()
@click.argument("project")
@click.argument("source_ref")
@click.option("--target", default="refs/shared/main", show_default=True)
@click.option("-m", "--message", default="")
@click.option("--select", "selected", multiple=True, help="<changeset>:<ordinal> to cherry-pick.")
@click.pass_context
def propose(ctx: click.Context, project: str, source_ref: str, target: str, message: str,
            selected: tuple[str, ...]) -> None:
    """Propose merging your SOURCE_REF (pinned at its current head) into a protected ref."""
    doc = _client(ctx).call("POST", f"/{project}/proposals", {
        "source_ref": source_ref, "target_ref": target, "message": message,
        "selected_ops": list(selected), "idempotency_key": secrets.token_hex(16)})
    _emit(ctx, doc, f"proposal {doc['proposal_id']} ({doc['status']}, "
                    f"{len(doc['conflict_ids'])} conflicts)")


@command.command()
@click.argument("proposal_id")
@click.argument("verdict", type=click.Choice(["approve", "request_changes", "reject"]))
@click.option("--comment", default="")
@click.option("--severity", default="info",
              type=click.Choice(["info", "minor", "major", "critical"]))
@click.pass_context
def review(ctx: click.Context, proposal_id: str, verdict: str, comment: str,
           severity: str) -> None:
    """Record your independent verdict on a proposal you did not author."""
    doc = _client(ctx).call("POST", f"/proposals/{proposal_id}/reviews",
                            {"verdict": verdict, "comment": comment, "severity": severity})
    _emit(ctx, doc, f"{doc['verdict']} recorded on {proposal_id}")


@command.command()
@click.argument("project")
@click.argument("proposal_id")
@click.pass_context
def merge(ctx: click.Context, project: str, proposal_id: str) -> None:
    """Ask for a signed merge authorization, then advance the protected ref with it."""
    client = _client(ctx)
    req = client.call("POST", f"/proposals/{proposal_id}/authorize", {})
    req.pop("strategy", None)
    doc = client.call("POST", f"/{project}/refs/merge", req)
    _emit(ctx, doc, f"{doc['ref']['ref_name']} -> {doc['ref']['head_changeset_id']} "
                    f"({doc['advance']['strategy']})")


@command.command()
@click.argument("proposal_id")
@click.pass_context
def cancel(ctx: click.Context, proposal_id: str) -> None:
    """Cancel your own open proposal (its history is kept)."""
    doc = _client(ctx).call("POST", f"/proposals/{proposal_id}/cancel", {})
    _emit(ctx, doc, f"proposal {proposal_id} {doc['status']}")


@command.command()
@click.argument("project")
@click.option("--status", default=None)
@click.pass_context
def proposals(ctx: click.Context, project: str, status: str | None) -> None:
    """Proposals of a project, newest first."""
    doc = _client(ctx).call("GET", f"/{project}/proposals", params={"status": status})
    lines = [f"{p['proposal_id']}  {p['status']}  {p['source_ref']} -> {p['target_ref']}  "
             f"by {p['originator_principal']}" for p in doc]
    _emit(ctx, doc, "\n".join(lines) or "(none)")


@command.command()
@click.argument("changeset_id")
@click.option("--base", default=None, help="Base changeset (default: first parent).")
@click.pass_context
def diff(ctx: click.Context, changeset_id: str, base: str | None) -> None:
    """Semantic diff of a changeset."""
    body = {"base_changeset_id": base} if base else {}
    doc = _client(ctx).call("POST", f"/changesets/{changeset_id}/diff", body)
    lines = [f"{name}: {len(items)}" for name, items in doc.items() if items]
    _emit(ctx, doc, "\n".join(lines) or "(no changes)")


@command.command()
@click.argument("proposal_id")
@click.pass_context
def proposal(ctx: click.Context, proposal_id: str) -> None:
    """One proposal with its reviews."""
    doc = _client(ctx).call("GET", f"/proposals/{proposal_id}")
    lines = [f"{doc['proposal_id']}  {doc['status']}  {doc['source_ref']} -> "
             f"{doc['target_ref']}  by {doc['originator_principal']}",
             f"pinned head {doc['head_changeset_id']}, digest {doc['proposal_digest']}"]
    lines += [f"  {r['verdict']} by {r['reviewer_principal']}: {safe_line(r['comment'])}"
              for r in doc["reviews"]]
    _emit(ctx, doc, "\n".join(lines))


@command.command()
@click.argument("project")
@click.option("--review-required/--no-review-required", default=None,
              help="Turn review of agents' writes on or off (needs delete on the memory).")
@click.pass_context
def settings(ctx: click.Context, project: str, review_required: bool | None) -> None:
    """Show or change whether PROJECT takes agents' writes as proposals."""
    client = _client(ctx)
    if review_required is None:
        doc = client.call("GET", f"/{project}/settings")
    else:
        doc = client.call("PUT", f"/{project}/settings", {"review_required": review_required})
    _emit(ctx, doc, f"review_required: {str(doc['review_required']).lower()} "
                    f"(for {', '.join(doc['reviewed_types'])})")


@command.command()
@click.pass_context
def keygen(ctx: click.Context) -> None:
    """Print a fresh 32-byte merge key for PAL_MERGE_HMAC_KEYS (local, no server needed)."""
    key = secrets.token_hex(32)
    _emit(ctx, {"key": key}, key)


__all__ = ["Client", "command"]
