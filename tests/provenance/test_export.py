"""``pal export --git`` and ``pal verify DIR``: a real Git repository of the signed history,
checked offline; every edit of the hostile corpus is refused naming what failed."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2
import pytest

from palimpsest import canonical
from palimpsest.identity import b64_nopad, new_identity
from palimpsest.service import MemoryService
from palimpsest.service.memorygit.reviewed import ReviewedWrites
from palimpsest.service.memorygit.wiring import open_flow
from palimpsest.service.provenance import layout, signing, verify
from palimpsest.service.provenance.receipt import Refused
from tests.api.server import pal_command
from tests.stored import grep_data_dir

CASES = json.loads((Path(__file__).resolve().parents[1] / "adversarial" / "provenance"
                    / "exports.json").read_text())
SECRET = "Quillwort-7 is the vault code"


def _world(data: Path) -> tuple[str, dict[str, Any]]:
    """A memory with direct writes, a revision, an erase, a reviewed write merged and an
    agent's own signature; returns its id and the published keys."""
    with MemoryService(data) as svc:
        made = svc.bootstrap_owner()
        assert made is not None
        owner = svc.caller(made[0].id)
        mid = svc.create_memory(owner, {"name": "team"})["id"]
        bot = svc.caller(svc.create_member("bot", "agent").id)
        svc.put_grant(owner, mid, {"principal": f"member:{bot.member.id}",
                                   "privileges": ["read", "write"]})
        first = svc.remember(owner, mid, {"type": "fact", "content": "the build runs on Debian"})
        svc.revise(owner, mid, first["id"], {"content": "the build runs on Debian 13",
                                             "reason": "more exact"})
        secret = svc.remember(owner, mid, {"content": SECRET})
        svc.erase(owner, mid, {"record_ids": [secret["id"]]})
        me = new_identity("bot")
        svc.register_key(bot, {"public_key": me.public_key_text})
        svc.remember(bot, mid, {"content": "signed by the agent too"})
        head = svc.list_refs(owner, mid)["data"][0]["head_changeset_id"]
        doc = svc.changeset_signatures(bot, mid, head)
        svc.sign_changeset(bot, mid, head, {"public_key": me.public_key_text, "signature":
                                            b64_nopad(me.sign(base64.b64decode(doc["canonical"])))})
        flow = open_flow(svc)
        who = f"member:{owner.member.id}"
        ReviewedWrites(flow).put_settings(who, mid, {"review_required": True})
        pending = svc.remember(bot, mid, {"content": "deploys need two people"})
        flow.review(who, pending["proposal_id"], {"verdict": "approve"})
        flow.merge(who, mid, flow.authorize(who, pending["proposal_id"], {}))
        svc.create_memory(owner, {"name": "other"})
        return mid, svc.provenance_keys()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("export")
    mid, keys = _world(root / "data")
    done = subprocess.run(pal_command("export", "--git", str(root / "repo"), "--memory", mid,
                                      "--data-dir", str(root / "data"), "--json"),
                          capture_output=True, check=True)
    report = json.loads(done.stdout)
    assert report["memories"] == [mid] and report["changesets"] >= 6
    return root, mid, keys


def test_an_untouched_export_verifies_without_the_server(
        exported: tuple[Path, str, dict[str, Any]], tmp_path: Path) -> None:
    root, _mid, keys = exported
    moved = tmp_path / "elsewhere"
    shutil.copytree(root / "repo", moved)  # a machine with the repository and nothing else
    keys_file = tmp_path / "keys.json"
    keys_file.write_bytes(canonical.encode(keys))
    done = subprocess.run(pal_command("verify", str(moved), "--keys", str(keys_file), "--json"),
                          capture_output=True, check=True, env={**os.environ, "PAL_DATA_DIR":
                                                                 str(tmp_path / "none")})
    report = json.loads(done.stdout)
    assert report["ok"] and report["keys"] == "given with --keys"
    assert report["signatures"] == report["changesets"] + 1  # the agent's own signature too
    log = subprocess.run(["git", "-C", str(moved), "log", "--format=%s", "refs/shared/main"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert "remember" in log and "revise" in log and "erase" in log
    refs = subprocess.run(["git", "-C", str(moved), "for-each-ref", "--format=%(refname)"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert "refs/shared/main" in refs and any(r.startswith("refs/agents/") for r in refs)


def test_erased_bodies_stay_erased_and_their_digests_stay(
        exported: tuple[Path, str, dict[str, Any]]) -> None:
    root, _mid, _keys = exported
    assert grep_data_dir(root / "repo", "Quillwort") == []
    repo = pygit2.Repository(str(root / "repo"))
    erased = 0
    for commit in repo.walk(repo.references["refs/shared/main"].target):
        content = json.loads(commit.tree[layout.CHANGESET].data)
        held = {e.name for e in repo[commit.tree[layout.BODIES].id]} \
            if layout.BODIES in commit.tree else set()
        erased += len(layout.body_digests(content) - held)
    assert erased >= 1


def test_an_export_of_every_memory_namespaces_refs(tmp_path: Path) -> None:
    mid, _keys = _world(tmp_path / "data")
    with MemoryService(tmp_path / "data") as svc:
        report = svc.export_git(tmp_path / "all")
        with pytest.raises(Exception, match="not empty"):
            svc.export_git(tmp_path / "all")
    assert len(report["memories"]) == 2
    names = list(pygit2.Repository(str(tmp_path / "all")).references)
    assert f"refs/memories/{mid}/shared/main" in names
    assert verify.verify(tmp_path / "all")["ok"]


# --- the hostile corpus ----------------------------------------------------------------------
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


def _apply(repo: pygit2.Repository, edit: str) -> None:
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
    else:
        raise AssertionError(f"unknown edit {edit}")


def _has_body(repo: pygit2.Repository) -> bool:
    tip = repo.references["refs/shared/main"].peel(pygit2.Commit)
    return layout.BODIES in tip.tree


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_a_tampered_export_is_refused_by_name(exported: tuple[Path, str, dict[str, Any]],
                                              tmp_path: Path, case: dict[str, Any]) -> None:
    root, _mid, keys = exported
    copy = tmp_path / "copy"
    shutil.copytree(root / "repo", copy)
    repo = pygit2.Repository(str(copy))
    assert _has_body(repo)  # the tip carries a body, so body edits have one to change
    _apply(repo, case["edit"])
    pinned = signing.trusted_keys(keys) if case.get("pin_keys") else None
    with pytest.raises(Refused) as refused:
        verify.verify(copy, pinned)
    assert refused.value.part.startswith(case["expect"]), str(refused.value)
    assert case["reason"] in refused.value.reason, str(refused.value)
    # the command says the same, on one line, exit 1
    args = ["verify", str(copy)]
    if pinned is not None:
        keys_file = tmp_path / "keys.json"
        keys_file.write_bytes(canonical.encode(keys))
        args += ["--keys", str(keys_file)]
    done = subprocess.run(pal_command(*args), capture_output=True, text=True, check=False)
    assert done.returncode == 1 and done.stderr.startswith(f"pal: {case['expect']}")
