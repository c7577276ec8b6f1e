"""``pal memory-git``: Memory Git from a terminal, over HTTP to a running ``pal serve``.

The CLI is a client, never a second server: it sends the same requests an agent would
(:class:`palimpsest.client.Client`, ``client.memory_git``), with a bearer credential, so every
rule (owned refs, review, signed merges) is enforced by the server. Connection, output and
refusals are those of every client command (:mod:`.connect`): ``--url``/``$PAL_URL``,
``--credential-file``/``$PAL_CREDENTIAL``, ``--json`` anywhere; human output is inert.
"""

# ruff: noqa: PLR0917  -- click passes every option by keyword; signatures mirror the options
from __future__ import annotations

import secrets
import uuid
from pathlib import Path
from typing import Any

import click

from palimpsest import canonical
from palimpsest.cli import connect
from palimpsest.client import Client
from palimpsest.errors import InvalidInput
from palimpsest.text import safe_line


def _client(ctx: click.Context) -> Client:
    return connect.client(ctx)


def _emit(ctx: click.Context, doc: Any, human: str) -> None:
    connect.emit(ctx, doc, lambda: [human])


@click.group(name="memory-git", cls=connect.ClientGroup)
@connect.connection
def command() -> None:
    """Versioned, reviewed memory: refs, changesets, proposals, reviews, signed merges."""


@command.command()
@click.pass_context
def projects(ctx: click.Context) -> None:
    """List projects (memories) with Memory Git history."""
    doc = _client(ctx).memory_git.projects()
    _emit(ctx, doc, "\n".join(doc["projects"]) or "(none)")


@command.command()
@click.argument("project")
@click.pass_context
def init(ctx: click.Context, project: str) -> None:
    """Create the root changeset and refs/shared/main of PROJECT."""
    doc = _client(ctx).memory_git.init(project)
    _emit(ctx, doc, f"refs/shared/main -> {doc['ref']['head_changeset_id']}")


@command.command()
@click.argument("project")
@click.pass_context
def refs(ctx: click.Context, project: str) -> None:
    """List the refs of PROJECT."""
    doc = _client(ctx).memory_git.refs(project)
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
    git = _client(ctx).memory_git
    if head is None:
        head = git.ref(project, "refs/shared/main")["head_changeset_id"]
    if head is None:
        raise InvalidInput("refs/shared/main has no head yet", code="no-head",
                           hint=f"run `pal memory-git init {project}` first")
    doc = git.branch(project, ref_name, head)
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
    git = _client(ctx).memory_git
    ref = git.ref(project, ref_name)
    doc = git.commit(project, ref_name, ops, expected_head=ref["head_changeset_id"],
                     idempotency_key=idempotency_key or str(uuid.uuid4()), message=message)
    _emit(ctx, doc, f"{doc['changeset_id']} on {ref_name} ({len(doc['ops'])} ops)")


@command.command()
@click.argument("project")
@click.option("--ref", "ref_name", default="refs/shared/main", show_default=True)
@click.option("--limit", default=20, show_default=True)
@click.pass_context
def log(ctx: click.Context, project: str, ref_name: str, limit: int) -> None:
    """Changesets reachable from a ref, newest first."""
    doc = _client(ctx).memory_git.log(project, ref=ref_name, limit=limit)
    lines = [f"{c['changeset_id']}  {c['author_principal']}  {safe_line(c['message'])}"
             for c in doc["changesets"]]
    _emit(ctx, doc, "\n".join(lines) or "(empty)")


@command.command()
@click.argument("changeset_id")
@click.pass_context
def show(ctx: click.Context, changeset_id: str) -> None:
    """One changeset (its integrity digest is verified by the server)."""
    doc = _client(ctx).memory_git.changeset(changeset_id)
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
    doc = _client(ctx).memory_git.context(project, ref=ref_name, head=head, query=query,
                                          limit=limit)
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
    doc = _client(ctx).memory_git.propose(project, source_ref, target_ref=target,
                                          message=message, selected_ops=selected,
                                          idempotency_key=secrets.token_hex(16))
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
    doc = _client(ctx).memory_git.review(proposal_id, verdict, comment=comment,
                                         severity=severity)
    _emit(ctx, doc, f"{doc['verdict']} recorded on {proposal_id}")


@command.command()
@click.argument("project")
@click.argument("proposal_id")
@click.pass_context
def merge(ctx: click.Context, project: str, proposal_id: str) -> None:
    """Ask for a signed merge authorization, then advance the protected ref with it."""
    git = _client(ctx).memory_git
    doc = git.merge(project, git.authorize(proposal_id))
    _emit(ctx, doc, f"{doc['ref']['ref_name']} -> {doc['ref']['head_changeset_id']} "
                    f"({doc['advance']['strategy']})")


@command.command()
@click.argument("proposal_id")
@click.pass_context
def cancel(ctx: click.Context, proposal_id: str) -> None:
    """Cancel your own open proposal (its history is kept)."""
    doc = _client(ctx).memory_git.cancel(proposal_id)
    _emit(ctx, doc, f"proposal {proposal_id} {doc['status']}")


@command.command()
@click.argument("project")
@click.option("--status", default=None)
@click.pass_context
def proposals(ctx: click.Context, project: str, status: str | None) -> None:
    """Proposals of a project, newest first."""
    doc = _client(ctx).memory_git.proposals(project, status=status)
    lines = [f"{p['proposal_id']}  {p['status']}  {p['source_ref']} -> {p['target_ref']}  "
             f"by {p['originator_principal']}" for p in doc]
    _emit(ctx, doc, "\n".join(lines) or "(none)")


@command.command()
@click.argument("changeset_id")
@click.option("--base", default=None, help="Base changeset (default: first parent).")
@click.pass_context
def diff(ctx: click.Context, changeset_id: str, base: str | None) -> None:
    """Semantic diff of a changeset."""
    doc = _client(ctx).memory_git.diff(changeset_id, base_changeset_id=base)
    lines = [f"{name}: {len(items)}" for name, items in doc.items() if items]
    _emit(ctx, doc, "\n".join(lines) or "(no changes)")


@command.command()
@click.argument("proposal_id")
@click.pass_context
def proposal(ctx: click.Context, proposal_id: str) -> None:
    """One proposal with its reviews."""
    doc = _client(ctx).memory_git.proposal(proposal_id)
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
    git = _client(ctx).memory_git
    if review_required is None:
        doc = git.settings(project)
    else:
        doc = git.put_settings(project, review_required=review_required)
    _emit(ctx, doc, f"review_required: {str(doc['review_required']).lower()} "
                    f"(for {', '.join(doc['reviewed_types'])})")


@command.command()
@click.pass_context
def keygen(ctx: click.Context) -> None:
    """Print a fresh 32-byte merge key for PAL_MERGE_HMAC_KEYS (local, no server needed)."""
    key = secrets.token_hex(32)
    _emit(ctx, {"key": key}, key)


__all__ = ["command"]
