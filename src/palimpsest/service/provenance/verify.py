"""``pal verify DIR``: every signature, chain and ref of an exported history, offline.

Reads a repository :mod:`.export` wrote (the layout of :mod:`.layout`) and trusts nothing
in it but what the server's keys sign: the keys are the ones given (``--keys``) or, failing
that, the ``keys.json`` the export carries (the report says which). Checked, in order, and
refused at the first failure with a reason naming what failed:

- the **statement** (which head each ref had) is signed by a trusted key;
- every **ref** the statement names exists and points at that changeset, and no other ref
  of a memory is there (a ref moved back to an older changeset, or one added, is refused
  although every changeset still verifies);
- every **changeset** reachable from them: its bytes are canonical JSON whose SHA-256 is the
  id its commit names, of the memory it says;
- its **signatures**: at least one by a trusted server key, and every one (members' too)
  verifies over those bytes, no weak key;
- its **parent link**: the commit's parents are exactly the changesets its bytes name;
- its **bodies**: each one hashes to its name, and is one the changeset names.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from palimpsest import canonical
from palimpsest.errors import InvalidInput
from palimpsest.service.provenance import layout, signing
from palimpsest.service.provenance.receipt import Refused


def _blob(repo: pygit2.Repository, tree: Any, name: str, what: str) -> bytes:
    try:
        entry = tree[name]
    except KeyError as exc:
        raise Refused(what, f"{name} is missing") from exc
    obj = repo[entry.id]
    if not isinstance(obj, pygit2.Blob):
        raise Refused(what, f"{name} is not a file")
    if obj.size > layout.MAX_BLOB:
        raise Refused(what, f"{name} is larger than {layout.MAX_BLOB} bytes")
    return bytes(obj.data)


def _json(data: bytes, what: str) -> Any:
    try:
        return canonical.decode(data, allow_floats=True)
    except InvalidInput as exc:
        raise Refused(what, f"not strict JSON ({exc.message})") from exc


def _peel(ref: pygit2.Reference, what: str) -> pygit2.Commit:
    try:
        return ref.peel(pygit2.Commit)
    except (ValueError, pygit2.GitError, KeyError) as exc:
        raise Refused(what, "it does not point at a commit") from exc


def open_export(directory: Path) -> pygit2.Repository:
    """The repository at ``directory``, refused by name when it is none."""
    try:
        return pygit2.Repository(str(directory))
    except (pygit2.GitError, KeyError) as exc:
        raise Refused("repository", f"{directory} is not a Git repository") from exc


def statement_of(repo: pygit2.Repository, keys: dict[str, str] | None
                 ) -> tuple[dict[str, Any], dict[str, str], str]:
    """The verified statement, the trusted keys and where they came from."""
    ref = repo.references.get(layout.EXPORT_REF)
    if ref is None:
        raise Refused("statement", f"{layout.EXPORT_REF} is missing (not an export)")
    commit = _peel(ref, "statement")
    source = "given with --keys"
    if keys is None:
        carried = _json(_blob(repo, commit.tree, layout.KEYS, "keys"), "keys")
        try:
            keys = signing.trusted_keys(carried)
        except InvalidInput as exc:
            raise Refused("keys", exc.message) from exc
        source = "carried by the export (pass --keys to pin the server's)"
    data = _blob(repo, commit.tree, layout.STATEMENT, "statement")
    doc = _json(data, "statement")
    sig = _json(_blob(repo, commit.tree, layout.STATEMENT_SIG, "statement"), "statement")
    if not isinstance(sig, dict) or keys.get(str(sig.get("key_id"))) != sig.get("public_key"):
        raise Refused("statement signature", "not made by one of the server's keys")
    why = signing.problem(str(sig.get("public_key")), str(sig.get("signature")),
                          layout.STATEMENT_DOMAIN + data)
    if why is not None:
        raise Refused("statement signature", why)
    if not isinstance(doc, dict) or doc.get("format") != layout.FORMAT \
            or not isinstance(doc.get("refs"), dict):
        raise Refused("statement", f"not a {layout.FORMAT} statement")
    return doc, keys, source


@dataclass(frozen=True, slots=True)
class Verified:
    """What :func:`check` found to hold: its report, the signed statement, every exported ref
    (``git ref -> (memory, ref, head)``) and every changeset's commit, parents first."""

    report: dict[str, Any]
    statement: dict[str, Any]
    refs: dict[str, tuple[str, str, str]]
    commits: list[tuple[str, str, str]]  # (commit oid, memory id, changeset id)


def verify(directory: Path, keys: dict[str, str] | None = None) -> dict[str, Any]:
    """Verify an export; returns what was checked.

    Raises:
        Refused: the first part that failed, by name.
    """
    return check(open_export(directory), keys).report


def check(repo: pygit2.Repository, keys: dict[str, str] | None = None) -> Verified:
    """Verify the export in ``repo`` (what :func:`verify` does; an import reads the result).

    Raises:
        Refused: the first part that failed, by name.
    """
    doc, trusted, source = statement_of(repo, keys)
    single = doc.get("memory")
    expected: dict[str, tuple[str, str, str]] = {}  # git ref -> (memory, ref, head)
    for mid, refs in doc["refs"].items():
        if not isinstance(refs, dict):
            raise Refused("statement", f"the refs of memory {str(mid)[:40]} are not an object")
        for name, head in refs.items():
            expected[layout.git_ref(mid, name, single=single is not None)] = (mid, name, head)
    present = {r for r in repo.references if r != layout.EXPORT_REF}
    for extra in sorted(present - set(expected)):
        raise Refused(f"ref {extra}", "it is not in the signed statement (a foreign ref)")
    seen: dict[str, tuple[str, str]] = {}  # commit oid -> (changeset id, memory id)
    order: list[tuple[str, str, str]] = []
    counts = {"changesets": 0, "signatures": 0}
    for git_name, (mid, _name, head) in sorted(expected.items()):
        if git_name not in present:
            raise Refused(f"ref {git_name}", "the signed statement names it, the export "
                          "lacks it")
        target = _peel(repo.references[git_name], f"ref {git_name}")
        got = _changeset(repo, target, mid, trusted, seen, counts, order)
        if got != head:
            raise Refused(f"ref {git_name}", f"points at changeset {got[:12]}, the signed "
                          f"statement says {str(head)[:12]} (a ref moved)")
    report = {"object": "palimpsest.export.verified", "ok": True,
              "memories": sorted(doc["refs"]), "changesets": counts["changesets"],
              "signatures": counts["signatures"], "refs": len(expected), "keys": source,
              "exported_at": doc.get("exported_at")}
    return Verified(report, doc, expected, order)


def _changeset(repo: pygit2.Repository, top: pygit2.Commit, memory_id: str,  # noqa: PLR0917
               keys: dict[str, str], seen: dict[str, tuple[str, str]],
               counts: dict[str, int], order: list[tuple[str, str, str]]) -> str:
    """Verify every commit reachable from ``top`` (parents first); returns its changeset id."""
    stack: list[tuple[pygit2.Commit, bool]] = [(top, False)]
    while stack:
        commit, expanded = stack.pop()
        key = str(commit.id)
        if key in seen:
            continue
        if not expanded:
            stack.append((commit, True))
            stack.extend((p, False) for p in commit.parents if str(p.id) not in seen)
            continue
        seen[key] = (_one(repo, commit, memory_id, keys, seen, counts), memory_id)
        order.append((key, memory_id, seen[key][0]))
    cid, owner = seen[str(top.id)]
    if owner != memory_id:  # a ref of one memory pointing into another's history
        raise Refused(f"changeset bytes (changeset {cid[:12]})",
                      f"not a changeset of memory {memory_id}")
    return cid


def _one(repo: pygit2.Repository, commit: pygit2.Commit, memory_id: str,  # noqa: PLR0917
         keys: dict[str, str], seen: dict[str, tuple[str, str]], counts: dict[str, int]
         ) -> str:
    named = layout.named(commit.message)
    where = f"commit {str(commit.id)[:12]}"
    if named is None:
        raise Refused(f"changeset bytes ({where})", "the commit names no changeset")
    cid, mid = named
    where = f"changeset {cid[:12]}"
    data = _blob(repo, commit.tree, layout.CHANGESET, f"changeset bytes ({where})")
    if hashlib.sha256(data).hexdigest() != cid:
        raise Refused(f"changeset bytes ({where})", "their SHA-256 is not the changeset id")
    content = _json(data, f"changeset bytes ({where})")
    if not isinstance(content, dict) or canonical.encode(content) != data:
        raise Refused(f"changeset bytes ({where})", "not in canonical form")
    if mid != memory_id or content.get("project_id") != memory_id:
        raise Refused(f"changeset bytes ({where})", f"not a changeset of memory {memory_id}")
    sigs = _json(_blob(repo, commit.tree, layout.SIGNATURES, f"signature ({where})"),
                 f"signature ({where})")
    server = 0
    for raw in sigs if isinstance(sigs, list) else ():
        try:
            sig = signing.signature_of(raw)
        except InvalidInput as exc:
            raise Refused(f"signature ({where})", exc.message) from exc
        if sig.role == "server" and keys.get(sig.key_id) != sig.public_key:
            raise Refused(f"signature ({where})", f"key {sig.key_id[:16]} is not one of the "
                          "server's keys")
        why = signing.problem(sig.public_key, sig.signature, data)
        if why is not None:
            raise Refused(f"signature ({where})", f"{sig.signer}: {why}")
        server += sig.role == "server"
        counts["signatures"] += 1
    if not server:
        raise Refused(f"signature ({where})", "no signature by the server")
    parents = [seen[str(p.id)][0] for p in commit.parents]
    if any(seen[str(p.id)][1] != memory_id for p in commit.parents):
        raise Refused(f"parent link ({where})", "a parent is a changeset of another memory")
    if parents != content.get("parent_ids"):
        raise Refused(f"parent link ({where})", "the commit's parents are not the changesets "
                      "its signed bytes name")
    _bodies(repo, commit, content, where)
    counts["changesets"] += 1
    return cid


def _bodies(repo: pygit2.Repository, commit: pygit2.Commit, content: dict[str, Any],
            where: str) -> None:
    try:
        entry = commit.tree[layout.BODIES]
    except KeyError:
        return
    tree = repo[entry.id]
    if not isinstance(tree, pygit2.Tree):
        raise Refused(f"body ({where})", f"{layout.BODIES} is not a folder")
    names = layout.body_digests(content)
    for item in tree:
        name = str(item.name)
        if name not in names:
            raise Refused(f"body ({where})", f"{name[:12]} is not a body the changeset names")
        data = _blob(repo, tree, name, f"body ({where})")
        if hashlib.sha256(data).hexdigest() != name:
            raise Refused(f"body ({where})", f"{name[:12]} does not hash to its name")


__all__ = ["Verified", "check", "open_export", "statement_of", "verify"]
