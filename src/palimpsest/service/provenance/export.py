"""``pal export --git``: a memory's history written as a real Git repository — the I/O shell.

The layout is :mod:`.layout`'s. The repository is made bare, new (an existing non-empty
directory is refused: an export never mixes with anything), written from one consistent read
of the store, and only then given its refs, so a failed export leaves no repository that
looks complete: its directory is removed.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pygit2

from palimpsest import canonical
from palimpsest.errors import InvalidInput, NotFound, Unavailable
from palimpsest.identity import b64_nopad
from palimpsest.service import history
from palimpsest.service.model import Changeset, Wire
from palimpsest.service.provenance import layout
from palimpsest.service.provenance.keys import ServerKeys
from palimpsest.service.storage.protocol import Store

Progress = Callable[[int], None]


def _when(created_at: str) -> int:
    try:
        return int(datetime.fromisoformat(created_at.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0


def _tree(repo: pygit2.Repository, files: dict[str, bytes], bodies: dict[str, bytes]) -> Any:
    top = repo.TreeBuilder()
    for name, data in sorted(files.items()):
        top.insert(name, repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB)
    if bodies:
        sub = repo.TreeBuilder()
        for name, data in sorted(bodies.items()):
            sub.insert(name, repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB)
        top.insert(layout.BODIES, sub.write(), pygit2.GIT_FILEMODE_TREE)
    return top.write()


def _batches(items: Iterator[Changeset], size: int = 500) -> Iterator[list[Changeset]]:
    batch: list[Changeset] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def export(store: Store, keys: ServerKeys, directory: Path, memory_id: str | None = None,
           progress: Progress | None = None) -> Wire:
    """Write the history of ``memory_id`` (or of every memory) to a new bare repository.

    Raises:
        InvalidInput: ``export-exists`` when ``directory`` is not empty.
        NotFound: memory_not_found for an unknown ``memory_id``.
    """
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise InvalidInput(f"{directory} exists and is not empty", code="export-exists",
                           hint="export into a new directory")
    made = not directory.exists()
    try:
        return _write(store, keys, directory, memory_id, progress)
    except BaseException:
        if made:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            for child in directory.iterdir():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        raise


def _write(store: Store, keys: ServerKeys, directory: Path, memory_id: str | None,
           progress: Progress | None) -> Wire:
    repo = pygit2.init_repository(str(directory), bare=True)
    commits: dict[str, Any] = {}
    heads: dict[str, dict[str, str]] = {}
    count = sigs = 0
    authors: set[str] = set()
    writers: dict[str, dict[str, str]] = {}  # the members who authored changesets
    with store.read():
        names = {m.id: {"name": m.name, "description": m.description}
                 for m in store.all_memories()}
        memories = list(names)
        if memory_id is not None:
            if memory_id not in memories:
                raise NotFound("no such memory in this store", code="memory_not_found",
                               hint="list them with `pal admin` or GET /v1/memories")
            memories = [memory_id]
        for mid in memories:
            for batch in _batches(store.changesets(mid)):
                signatures = store.signatures([cs.id for cs in batch])
                for cs in batch:
                    history.verify(cs)
                    kind, _, ident = cs.author.partition(":")
                    if kind == "member":
                        authors.add(ident)
                    sigs += _commit(repo, store, cs, signatures.get(cs.id, []), commits)
                    count += 1
                    if progress is not None:
                        progress(count)
            heads[mid] = {r.name: r.head for r in store.refs(mid) if r.head}
        for ident in sorted(authors):
            found = store.member(ident)
            if found is not None:
                writers[ident] = {"name": found.name, "type": found.type}
    single = memory_id
    for mid, refs in heads.items():
        for name, head in refs.items():
            repo.references.create(layout.git_ref(mid, name, single=single is not None),
                                   commits[head], force=True)
    _statement(repo, keys, heads, single, names=names, writers=writers)
    return {"object": "palimpsest.export", "directory": str(directory), "memories": memories,
            "changesets": count, "signatures": sigs,
            "refs": sum(len(r) for r in heads.values())}


def _commit(repo: pygit2.Repository, store: Store, cs: Changeset, signatures: Sequence[Any],
            commits: dict[str, Any]) -> int:
    data = history.canonical_bytes(cs)
    content = canonical.decode(data)
    bodies = {}
    for digest in sorted(layout.body_digests(content if isinstance(content, dict) else {})):
        held = store.body(digest)
        if held is not None and history.body_matches(digest, held):
            bodies[digest] = held  # an erased (or damaged) body stays out: its digest is kept
    files = {layout.CHANGESET: data,
             layout.SIGNATURES: canonical.encode([s.to_wire() for s in signatures]),
             layout.STORED: canonical.encode({"created_at": cs.created_at})}
    tree = _tree(repo, files, bodies)
    try:
        parents = [commits[p] for p in cs.parent_ids]
    except KeyError as exc:
        raise Unavailable(f"changeset {cs.id[:12]} names a parent the store does not hold",
                          code="memory_unavailable",
                          hint="run pal admin rebuild; restore from a backup") from exc
    who = pygit2.Signature(cs.author[:200] or "unknown", "changeset@palimpsest.invalid",
                           _when(cs.created_at), 0)
    commits[cs.id] = repo.create_commit(None, who, who,
                                        layout.message(cs.message, cs.id, cs.memory_id,
                                                       cs.ref_name), tree, parents)
    return len(signatures)


def _statement(repo: pygit2.Repository, keys: ServerKeys, heads: dict[str, dict[str, str]],
               single: str | None, *, names: dict[str, dict[str, str]],
               writers: dict[str, dict[str, str]]) -> None:
    now = datetime.now().astimezone().strftime("%Y-%m-%dT%H:%M:%S%z")
    doc = layout.statement(heads, now, single, names, writers)
    key = keys.active()
    sig = {"key_id": key.actor, "public_key": key.public_key_text, "algorithm": "ed25519",
           "signature": b64_nopad(key.sign(layout.STATEMENT_DOMAIN + canonical.encode(doc)))}
    files = {layout.KEYS: canonical.encode(keys.published()),
             layout.STATEMENT: canonical.encode(doc),
             layout.STATEMENT_SIG: canonical.encode(sig)}
    who = pygit2.Signature("palimpsest", "export@palimpsest.invalid")
    oid = repo.create_commit(None, who, who, "export statement\n", _tree(repo, files, {}), [])
    repo.references.create(layout.EXPORT_REF, oid, force=True)


__all__ = ["export"]
