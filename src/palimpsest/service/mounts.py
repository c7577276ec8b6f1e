"""Repository memory in the service: a memory whose provider is a Git repository's
``hn-memory/0`` streams (``pal admin mount-repo PATH --memory ID``).

The service keeps only the mount — the repository's path, in the store's mount row — and reads
everything else from the repository on every request through :mod:`palimpsest.hn`'s public
recall (the warm path first, :func:`palimpsest.hn.recall.run.recall` when a ref moved or the
query commit is new). So the records are exactly what ``pal memory recall --json`` returns in
that repository at ``HEAD``: verified streams only (a tampered stream fails the read closed, as
it does there), applicable at ``HEAD``, evidence resolved, active and qualified by default; a
new commit or an appended memory shows up on the next read, with no restart and no copy.

A mounted memory is read-only: every write answers ``memory_unsupported`` (write in the
repository with ``pal memory record``). The tree, grants and the restricted cutoff stay the
server's, exactly as for the built-in provider: a repository is never read for a caller who may
not read its memory.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from palimpsest.errors import PalError
from palimpsest.hn import store as hnstore
from palimpsest.hn.recall.pages import RecallResult
from palimpsest.hn.recall.request import TRUSTS, normalize_request
from palimpsest.hn.recall.request import RecallRequest as HnRequest
from palimpsest.hn.recall.warm import recall_kept
from palimpsest.hn.store import headfiles
from palimpsest.service.model import (
    ContentPart,
    Principal,
    RecordBody,
    RecordVersion,
    Wire,
    invalid,
    not_found,
    unavailable,
    unsupported,
)
from palimpsest.service.providers import REPOSITORY_PROVIDER
from palimpsest.service.storage.protocol import Store
from palimpsest.service.wire import AllOf, Cond, Filter, RecallRequest
from palimpsest.text import lexical_tokens

RECORD_TYPE: Final = "note"  # every repository memory is a note; its kind is an attribute
_BIG: Final = 1 << 40  # no byte bound of our own: a UHP answer is bounded by its limit
_SCAN_PAGES: Final = 25  # pages read to fill a limit when filters drop records
_FIND_PAGE: Final = 500  # memories per page while looking for one by id
_MEMORY_ID: Final = re.compile(r"sha256:[0-9a-f]{64}")
_PUSHED: Final = {"attributes.kind": "kind", "attributes.trust": "trust",
                  "attributes.lifecycle": "lifecycle", "attributes.actor": "actor"}
# hn lifecycle → UHP status: a superseded or retracted memory is no longer the current word.
_STATUS: Final = {"superseded": "superseded", "branching": "superseded",
                  "retracted": "forgotten"}


def read_only() -> Exception:
    """The answer to every write of a mounted memory."""
    return unsupported("this memory's records are a Git repository's signed memory streams "
                       "and are read-only here; write in the repository (pal memory record)")


# --- mounting (operator) ----------------------------------------------------------------------
def repository_root(path: str | Path) -> str:
    """The repository at exactly ``path`` (its work tree or, bare, its git dir), resolved.

    Raises:
        InvalidInput: memory_invalid — the path is missing, not a repository (or only inside
            one), or has no commit at ``HEAD``.
    """
    where = Path(path).expanduser()
    hint = "give the top directory of a Git repository that holds hn-memory/0 streams"
    if not where.exists():
        raise invalid(f"{where} does not exist", hint=hint)
    try:
        repo = hnstore.open_repository(where)
    except PalError as exc:
        raise invalid(f"{where} is not a Git repository: {exc.message}", hint=hint) from exc
    root = Path(repo.workdir or repo.path).resolve()
    if root != where.resolve():
        raise invalid(f"{where} is inside the repository {root}, not its top", hint=hint)
    try:
        hnstore.resolve_commit(repo, "HEAD")
    except PalError as exc:
        raise invalid(f"the repository {root} has no commit at HEAD",
                      hint="commit once, then mount it") from exc
    return str(root)


def mount(store: Store, memory_id: str, path: str | Path, now: int) -> Wire:
    """Make the repository at ``path`` the provider of an existing, empty memory.

    Raises:
        NotFound: memory_not_found.
        InvalidInput: memory_invalid — a bad path, a memory already mounted or one that holds
            records or history (a mount never hides what was written).
    """
    root = repository_root(path)
    with store.write():
        found = {m.id: m for m in store.all_memories()}.get(memory_id)
        if found is None:
            raise not_found()
        if found.provider == REPOSITORY_PROVIDER:
            raise invalid(f"memory {memory_id} already reads {store.mounts().get(memory_id)}",
                          hint="delete the memory to unmount it")
        if store.record_counts([memory_id])[memory_id] or store.refs(memory_id):
            raise invalid(f"memory {memory_id} holds records or history",
                          hint="mount into a new, empty memory")
        store.mount_repository(memory_id, REPOSITORY_PROVIDER, root, now)
    # A first read builds the repository's index now, not under a caller's request; a
    # repository that cannot be read yet stays mounted and says why on each read.
    with contextlib.suppress(PalError, OSError):
        _page(root, Asked("", ("active",), {}), 1, "")
    return {"object": "memory.mount", "memory_id": memory_id,
            "provider": REPOSITORY_PROVIDER, "path": root}


# --- records --------------------------------------------------------------------------------
def record_of(memory_id: str, memory: Mapping[str, Any]) -> RecordVersion:
    """One memory of a repository recall page (its exact JSON, parsed) as a UHP record: the
    content is ``data.content``; everything the repository judged (kind, lifecycle, trust,
    applicability, evidence, signature, actor, stream…) is in ``attributes`` unchanged, and
    ``written_by`` is this provider on behalf of the signing actor (pure)."""
    data = dict(memory["data"])
    content = data.pop("content", "")
    attributes = {k: v for k, v in memory.items() if k not in ("id", "data")}
    attributes["data"] = data
    body = RecordBody(RECORD_TYPE, None, (ContentPart("text", text=content),), attributes, ())
    return RecordVersion(
        str(memory["id"]), memory_id, 1, _STATUS.get(str(memory["lifecycle"]), "active"), None,
        body, str(memory["signedTimestamp"]), None, Principal("provider", REPOSITORY_PROVIDER),
        "", on_behalf_of=Principal("member", f"hn-actor:{memory['actor']}"))


def is_mounted_record(record: Mapping[str, Any]) -> bool:
    """Whether a rendered record is a mounted repository's memory (only this provider writes
    them)."""
    writer = record.get("written_by")
    return isinstance(writer, Mapping) and writer.get("kind") == "provider" \
        and writer.get("id") == REPOSITORY_PROVIDER


def provenance(record: Mapping[str, Any]) -> Wire:
    """What ``include: ["provenance"]`` says of a repository memory: no changeset of this
    server made it; the repository's own Ed25519 signature over its ``memory.json`` did, checked
    on the read that returned it, and anyone holding the repository checks it again offline."""
    attributes = record.get("attributes", {})
    return {"object": "memory.provenance", "source": "hn-memory/0",
            "memory": record.get("id"),
            **{k: attributes.get(k) for k in ("stream", "actor", "signature", "contentDigest")},
            "verify": f"pal memory show {record.get('id')} --json, in the repository"}


# --- reading --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Asked:
    """What a UHP recall asks a repository, in its own filters (pure)."""

    query: str
    lifecycle: tuple[str, ...]
    filters: dict[str, tuple[str, ...]]


def _pushdown(f: Filter | None) -> dict[str, tuple[str, ...]]:
    """``eq``/``in`` conditions on kind, trust, lifecycle or actor at the top of a filter
    (alone or inside ``and``), as the repository's own filters: without them a trust class
    other than ``qualified`` could never be asked for (every condition is still checked on
    each record afterwards)."""
    conds = [f] if isinstance(f, Cond) else list(f.items) if isinstance(f, AllOf) else []
    out: dict[str, tuple[str, ...]] = {}
    for c in conds:
        if not isinstance(c, Cond):
            continue
        name = _PUSHED.get(c.field)
        if name is None or c.op not in ("eq", "in"):
            continue
        values = [c.value] if c.op == "eq" else list(c.value)
        if name in out or not all(isinstance(v, str) for v in values):
            continue
        out[name] = tuple(values)
    return out


def asked(req: RecallRequest) -> Asked:
    """The repository request a UHP recall makes: its words (``text``, and ``query`` words
    searched lexically) as the repository's lexical query — every term must be present, as
    ``pal memory recall --query`` — ``include: all`` as every lifecycle (pure)."""
    words = " ".join(x for x in (req.text, req.query) if x and x.strip())
    # The repository's tokenizer decides what a term is; words it keeps none of ask nothing.
    query = words if lexical_tokens(words) else ""
    return Asked(query, ("active",) if req.include == "active" else ("all",),
                 _pushdown(req.filters))


def _request(a: Asked, at: str, limit: int, cursor: str) -> HnRequest:
    pushed = a.filters
    return normalize_request(
        at_commit=at, query=a.query, kind=pushed.get("kind", ()),
        actor=pushed.get("actor", ()), trust=pushed.get("trust", ()),
        lifecycle=pushed.get("lifecycle", a.lifecycle), max_records=limit,
        max_content_bytes=_BIG, cursor=cursor)


def _page(path: str, a: Asked, limit: int, cursor: str) -> RecallResult:
    """One page of the repository's recall at its current ``HEAD``: the warm path (index and
    ref files), else through Git; both give ``pal memory recall``'s bytes."""
    git = headfiles.locate(path)
    at = headfiles.resolve(git, "HEAD") if git is not None else None
    repo = None
    if at is None:
        repo = hnstore.open_repository(path)
        at = hnstore.resolve_commit(repo, "HEAD")
    request = _request(a, at, limit, cursor)
    result = recall_kept(git, request) if git is not None else None
    if result is None:
        from palimpsest.hn.recall.run import recall  # noqa: PLC0415 - libgit2 only when needed

        result = recall(repo or hnstore.open_repository(path), request)
    return result


def search(path: str, memory_id: str, req: RecallRequest,
           keep: Callable[[RecordVersion], bool]) -> tuple[list[RecordVersion], list[str]]:
    """The records a mounted memory answers a recall with, in the repository's order
    (lifecycle, signed time newest first, id), each passing ``keep`` (the request's filters,
    evaluated as for every record), and what it could not serve (``degraded``)."""
    if req.as_of is not None:
        return [], [f"as_of:not_supported_by:{memory_id}"]
    if req.types is not None and RECORD_TYPE not in req.types:
        return [], []
    a = asked(req)
    if not a.query and req.filters is None:
        return [], []  # words the repository keeps no term of find nothing
    out: list[RecordVersion] = []
    cursor = ""
    try:
        for _ in range(_SCAN_PAGES):
            page = _page(path, a, req.limit, cursor)
            for raw in page.records:
                rec = record_of(memory_id, json.loads(raw))
                if keep(rec):
                    out.append(rec)
            cursor = page.next_cursor
            if len(out) >= req.limit or not cursor:
                break
    except (PalError, OSError) as exc:
        # Fail closed as the repository does: nothing of it is served, and the answer says why.
        code = exc.code if isinstance(exc, PalError) else "repository-unreadable"
        return [], [f"repository:{memory_id}:{code}"]
    return out[:req.limit], []


_COUNTS: dict[str, int] = {}  # path → the last count the warm path gave


def count(path: str) -> int:
    """How many memories the repository serves by default (active, qualified): a mounted
    memory's ``records.count``. Asked under the store's lock, so only the warm path (the index
    and the ref files, no Git, no index build) is read; when that cannot answer — a stream
    moved since the last read — the last count it gave stands (0 before any)."""
    git = headfiles.locate(path)
    if git is None:
        return 0  # no repository there (any more): it serves nothing
    at = headfiles.resolve(git, "HEAD")
    if at is None:
        return _COUNTS.get(path, 0)
    try:
        result = recall_kept(git, _request(Asked("", ("active",), {}), at, 1, ""))
    except (PalError, OSError):
        return 0
    if result is not None:
        _COUNTS[path] = result.matched
    return _COUNTS.get(path, 0)


def _unreadable(exc: PalError, path: str) -> Exception:
    # A reader is told what failed, never where the server keeps the repository.
    why = exc.message.replace(path, "the repository")
    return unavailable(f"the repository of this memory cannot be read: {why}")


def listing(path: str, memory_id: str, *, include: str, type: str | None, limit: int,
            cursor: str | None) -> Wire:
    """``GET …/records`` of a mounted memory: the repository's memories in its order (active
    and qualified, or every lifecycle with ``include=all``), pages continued by the
    repository's own cursor.

    Raises:
        InvalidInput: memory_invalid for a cursor the repository did not issue for this list.
        Unavailable: memory_unavailable when the repository cannot be read (a forged stream).
    """
    if type is not None and type != RECORD_TYPE:
        return {"object": "list", "data": [], "next": None}
    a = Asked("", ("active",) if include == "active" else ("all",), {})
    try:
        page = _page(path, a, limit, cursor or "")
    except PalError as exc:
        if cursor is not None and exc.code in ("invalid-cursor", "invalid-recall-request"):
            raise invalid("cursor is not one this server issued for this list",
                          hint="a repository's cursor continues the same list: same include, "
                          "type and limit") from exc
        raise _unreadable(exc, path) from exc
    data = [record_of(memory_id, json.loads(raw)).to_wire([]) for raw in page.records]
    return {"object": "list", "data": data, "next": page.next_cursor or None}


def find(path: str, memory_id: str, record_id: str) -> RecordVersion | None:
    """One memory of the repository by its ID, whatever its lifecycle or trust class (still
    only a verified memory applicable at ``HEAD`` with resolved evidence), or None.

    Raises:
        Unavailable: memory_unavailable when the repository cannot be read.
    """
    if not _MEMORY_ID.fullmatch(record_id):
        return None
    a = Asked("", ("all",), {"trust": TRUSTS})
    cursor = ""
    try:
        while True:
            page = _page(path, a, _FIND_PAGE, cursor)
            for raw in page.records:
                memory = json.loads(raw)
                if memory["id"] == record_id:
                    return record_of(memory_id, memory)
            cursor = page.next_cursor
            if not cursor:
                return None
    except PalError as exc:
        raise _unreadable(exc, path) from exc


def mounted(store: Store, memory_ids: list[str]) -> dict[str, str]:
    """The repository path of each mounted memory among ``memory_ids``."""
    paths = store.mounts()
    return {m: paths[m] for m in memory_ids if m in paths}


__all__ = ["RECORD_TYPE", "Asked", "asked", "count", "find", "is_mounted_record", "listing",
           "mount", "mounted", "provenance", "read_only", "record_of", "repository_root",
           "search"]
