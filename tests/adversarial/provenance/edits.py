"""Edits of a genuine export (``pal export --git``), applied with pygit2: what each case of
``exports.json`` and ``imports.json`` names under ``edit`` (see README.md here). Every edit
works on a copy; the tests build the genuine export with a real service first."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pygit2

from palimpsest import canonical
from palimpsest.identity import b64_nopad, new_identity
from palimpsest.service.provenance import layout, signing

Files = dict[str, bytes]


def _files(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = "") -> Files:
    out: Files = {}
    for entry in tree:
        obj = repo[entry.id]
        if isinstance(obj, pygit2.Tree):
            out.update(_files(repo, obj, f"{prefix}{entry.name}/"))
        else:
            assert isinstance(obj, pygit2.Blob)
            out[f"{prefix}{entry.name}"] = bytes(obj.data)
    return out


def _tree(repo: pygit2.Repository, files: Files) -> pygit2.Oid:
    top, sub = repo.TreeBuilder(), repo.TreeBuilder()
    nested = False
    for name, data in sorted(files.items()):
        if name.startswith("bodies/"):
            sub.insert(name[7:], repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB)
            nested = True
        else:
            top.insert(name, repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB)
    if nested:
        top.insert("bodies", sub.write(), pygit2.GIT_FILEMODE_TREE)
    return top.write()


Edit = Callable[[pygit2.Repository, Files, str, list[pygit2.Oid]],
                tuple[Files, str, list[pygit2.Oid]]]


def _rewrite(repo: pygit2.Repository, ref: str, edit: Edit) -> None:
    tip = repo.references[ref].peel(pygit2.Commit)
    files, message, parents = edit(repo, _files(repo, tip.tree), tip.message,
                                   [p.id for p in tip.parents])
    oid = repo.create_commit(None, tip.author, tip.committer, message, _tree(repo, files),
                             parents)
    repo.references[ref].set_target(oid)


def _statement(repo: pygit2.Repository, edit: Callable[[Files], Files]) -> None:
    tip = repo.references[layout.EXPORT_REF].peel(pygit2.Commit)
    files = edit(_files(repo, tip.tree))
    oid = repo.create_commit(None, tip.author, tip.committer, tip.message, _tree(repo, files),
                             [])
    repo.references[layout.EXPORT_REF].set_target(oid)


def _with_bytes(files: Files, data: bytes) -> Files:
    return {**files, layout.CHANGESET: data}


def _sigs(files: Files, change: Callable[[list[dict[str, Any]], bytes], None]) -> Files:
    sigs = json.loads(files[layout.SIGNATURES])
    change(sigs, files[layout.CHANGESET])
    return {**files, layout.SIGNATURES: canonical.encode(sigs)}


def _stranger_sig(sigs: list[dict[str, Any]], data: bytes) -> None:
    who = new_identity("stranger")
    sigs[0].update(public_key=who.public_key_text, key_id=who.actor,
                   signature=b64_nopad(who.sign(data)))


def _renamed(message: str, data: bytes) -> str:
    """The commit message naming the changeset whose bytes are ``data`` instead."""
    named = layout.named(message)
    assert named is not None
    return message.replace(named[0], hashlib.sha256(data).hexdigest())


def _body(files: Files, change: Callable[[bytes], bytes]) -> Files:
    name = next(n for n in files if n.startswith("bodies/"))
    return {**files, name: change(files[name])}


def apply(repo: pygit2.Repository, edit: str) -> None:
    """Apply the edit named ``edit`` to the export in ``repo``."""
    tip = "refs/shared/main"
    if edit == "bytes":
        _rewrite(repo, tip, lambda r, f, m, p: (
            _with_bytes(f, f[layout.CHANGESET].replace(b'"schema_version"', b'"schema_versiom"')),
            m, p))
    elif edit in ("bytes-rehashed", "not-canonical"):
        def change(r: Any, f: Files, m: str, p: list[pygit2.Oid]) -> tuple[Files, str, list[Any]]:
            doc = json.loads(f[layout.CHANGESET])
            doc["message"] = "tampered"
            data = json.dumps(doc, sort_keys=True, separators=(", ", ": ")).encode() \
                if edit == "not-canonical" else canonical.encode(doc)
            return _with_bytes(f, data), _renamed(m, data), p
        _rewrite(repo, tip, change)
    elif edit == "memory-line":
        _rewrite(repo, tip, lambda r, f, m, p: (f, m.replace("\nmemory ", "\nmemory x"), p))
    elif edit == "no-trailer":
        _rewrite(repo, tip, lambda r, f, m, p: (f, "no trailer\n", p))
    elif edit == "signature-flip":
        def flip(s: list[dict[str, Any]], _d: bytes) -> None:
            text = s[0]["signature"]
            s[0]["signature"] = ("B" if text[0] != "B" else "C") + text[1:]
        _rewrite(repo, tip, lambda r, f, m, p: (_sigs(f, flip), m, p))
    elif edit == "signature-stranger":
        _rewrite(repo, tip, lambda r, f, m, p: (_sigs(f, _stranger_sig), m, p))
    elif edit == "signature-none":
        _rewrite(repo, tip, lambda r, f, m, p: ({**f, layout.SIGNATURES: b"[]"}, m, p))
    elif edit == "signature-weak":
        def weak(s: list[dict[str, Any]], _d: bytes) -> None:
            s[0].update(role="member", signer="member:hmbr_weak",
                        public_key=b64_nopad(b"\x01" + bytes(31)))
        _rewrite(repo, tip, lambda r, f, m, p: (_sigs(f, weak), m, p))
    elif edit == "parent-skip":
        _rewrite(repo, tip, lambda r, f, m, p: (f, m, [r[p[0]].parents[0].id]))
    elif edit == "parent-extra":
        _rewrite(repo, tip, lambda r, f, m, p: (f, m, [*p, r[p[0]].parents[0].id]))
    elif edit == "rewind":
        ref = repo.references[tip]
        ref.set_target(ref.peel(pygit2.Commit).parents[0].id)
    elif edit == "ref-delete":
        repo.references.delete(tip)
    elif edit == "ref-foreign":
        repo.references.create("refs/agents/intruder/main", repo.references[tip].target)
    elif edit == "statement-edit":
        def moved(f: Files) -> Files:
            doc = json.loads(f[layout.STATEMENT])
            refs = next(iter(doc["refs"].values()))
            refs["refs/shared/main"] = "0" * 64
            return {**f, layout.STATEMENT: canonical.encode(doc)}
        _statement(repo, moved)
    elif edit == "statement-stranger":
        def forged(f: Files) -> Files:
            who = new_identity("stranger")
            keys = signing.published_keys([signing.key_entry(
                who.public_key_text, status="active", created_at="2026-01-01T00:00:00Z")])
            sig = {"key_id": who.actor, "public_key": who.public_key_text,
                   "signature": b64_nopad(who.sign(layout.STATEMENT_DOMAIN
                                                   + f[layout.STATEMENT]))}
            return {**f, layout.KEYS: canonical.encode(keys),
                    layout.STATEMENT_SIG: canonical.encode(sig)}
        _statement(repo, forged)
    elif edit == "statement-delete":
        repo.references.delete(layout.EXPORT_REF)
    elif edit == "body-flip":
        _rewrite(repo, tip, lambda r, f, m, p: (_body(f, lambda b: b.replace(b"e", b"3", 1)),
                                                m, p))
    elif edit == "body-foreign":
        _rewrite(repo, tip, lambda r, f, m, p: ({**f, "bodies/" + "ab" * 32: b"{}"}, m, p))
    elif edit == "body-oversized":
        _rewrite(repo, tip, lambda r, f, m, p: (_body(f, lambda b: b + b" " * (9 << 20)), m, p))
    elif edit == "malformed-object":
        # a commit whose author line has no email: Git's fsck (missingEmail) refuses it
        tip_commit = repo.references[tip].peel(pygit2.Commit)
        raw = (f"tree {tip_commit.tree.id}\nparent {tip_commit.id}\n"
               "author mallory 1700000000 +0000\ncommitter mallory 1700000000 +0000\n\n"
               "no email\n").encode()
        repo.references[tip].set_target(repo.write(pygit2.GIT_OBJECT_COMMIT, raw))
    elif edit == "signature-not-json":
        _rewrite(repo, tip, lambda r, f, m, p: ({**f, layout.SIGNATURES: b"[{'role': 1}]"},
                                                m, p))
    elif edit == "ref-not-commit":
        repo.references[tip].set_target(repo.create_blob(b"not a commit"))
    elif edit == "keys-stranger":
        def keys_only(f: Files) -> Files:
            who = new_identity("stranger")
            return {**f, layout.KEYS: canonical.encode(signing.published_keys([
                signing.key_entry(who.public_key_text, status="active",
                                  created_at="2026-01-01T00:00:00Z")]))}
        _statement(repo, keys_only)
    elif edit == "deep-bytes":
        _deep(repo, tip)
    elif edit != "none":
        raise AssertionError(f"unknown edit {edit}")


def _deep(repo: pygit2.Repository, tip: str) -> None:
    """Change the root changeset's message, rehash it, and rebuild every commit above it with
    its original files (signatures and all) on the new parents."""
    chain = list(repo.walk(repo.references[tip].target,
                           pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE))
    new: dict[pygit2.Oid, pygit2.Oid] = {}
    for index, commit in enumerate(chain):
        files, message = _files(repo, commit.tree), commit.message
        if index == 0:
            doc = json.loads(files[layout.CHANGESET])
            doc["message"] = "tampered long ago"
            data = canonical.encode(doc)
            files, message = _with_bytes(files, data), _renamed(message, data)
        parents = [new.get(p.id, p.id) for p in commit.parents]
        new[commit.id] = repo.create_commit(None, commit.author, commit.committer, message,
                                            _tree(repo, files), parents)
    repo.references[tip].set_target(new[chain[-1].id])


def has_body(repo: pygit2.Repository) -> bool:
    """The tip of ``refs/shared/main`` carries a body (so body edits have one to change)."""
    tip = repo.references["refs/shared/main"].peel(pygit2.Commit)
    return layout.BODIES in tip.tree
