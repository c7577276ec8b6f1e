"""Signed changesets: the server's identity signs every accepted changeset over its canonical
bytes; rotation keeps old public keys; members sign their own, checked by the server."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from pathlib import Path

import pytest

from palimpsest.errors import Conflict, InvalidInput, NotFound
from palimpsest.identity import b64_nopad, new_identity
from palimpsest.service import MemoryService, history
from palimpsest.service.memorygit.reviewed import ReviewedWrites
from palimpsest.service.memorygit.wiring import open_flow
from palimpsest.service.model import SHARED_MAIN, Caller
from palimpsest.service.provenance import signing
from tests.provenance.conftest import agent

# The Ed25519 identity point (order 1) and a point of order 8, as raw encodings: weak keys.
IDENTITY_POINT = b64_nopad(b"\x01" + b"\x00" * 31)
ORDER_EIGHT = b64_nopad(bytes.fromhex(
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"))


def _head(svc: MemoryService, mid: str, ref: str = SHARED_MAIN) -> str:
    found = svc.list_refs(svc.caller(svc.list_members()[0].id), mid)
    heads = {r["ref_name"]: r["head_changeset_id"] for r in found["data"]}
    return str(heads[ref])


def _canonical(doc: dict[str, object]) -> bytes:
    return base64.b64decode(str(doc["canonical"]))


def test_every_remember_is_signed_over_the_bytes_its_id_digests(svc: MemoryService,
                                                                 owner: Caller,
                                                                 mid: str) -> None:
    svc.remember(owner, mid, {"type": "fact", "content": "the build runs on Debian"})
    svc.remember(owner, mid, {"type": "fact", "content": "releases are on Tuesdays"})
    keys = signing.trusted_keys(svc.provenance_keys())
    head = _head(svc, mid)
    doc = svc.changeset_signatures(owner, mid, head)
    data = _canonical(doc)
    assert hashlib.sha256(data).hexdigest() == head == doc["changeset_id"]
    [sig] = doc["signatures"]
    assert sig["role"] == "server" and sig["key_id"] in keys
    assert signing.problem(sig["public_key"], sig["signature"], data) is None
    # the signed bytes name the parent: the link is under the signature
    parent = svc._store.changeset(head).parent_ids
    assert parent and parent[0].encode() in data


def test_a_signature_over_other_bytes_is_refused_by_name() -> None:
    me = new_identity("x")
    sig = signing.sign(me, b"one")
    assert signing.problem(sig.public_key, sig.signature, b"two") == \
        "the signature does not verify over the canonical bytes"
    assert "weak key" in str(signing.problem(IDENTITY_POINT, sig.signature, b"one"))
    assert "base64" in str(signing.problem(sig.public_key, sig.signature + "A", b"one"))


def test_the_server_key_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        with MemoryService(tmp_path / "d") as svc:
            svc.provenance_keys()
    finally:
        os.umask(old)
    folder = tmp_path / "d" / "provenance"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("server-key.json", "server-keys.json"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600


def test_rotation_keeps_old_public_keys_and_history_verifies(svc: MemoryService, owner: Caller,
                                                              mid: str) -> None:
    svc.remember(owner, mid, {"content": "before the rotation"})
    before = _head(svc, mid)
    first = svc.provenance_keys()["keys"][0]
    rotated = svc.rotate_server_key()
    assert [k["status"] for k in rotated["keys"]] == ["retired", "active"]
    assert rotated["keys"][0]["key_id"] == first["key_id"]
    assert rotated["keys"][0]["retired_at"] is not None
    svc.remember(owner, mid, {"content": "after the rotation"})
    after = _head(svc, mid)
    keys = signing.trusted_keys(rotated)
    for cid, key in ((before, rotated["keys"][0]), (after, rotated["keys"][1])):
        doc = svc.changeset_signatures(owner, mid, cid)
        [sig] = doc["signatures"]
        assert sig["key_id"] == key["key_id"] and sig["key_id"] in keys
        assert signing.problem(sig["public_key"], sig["signature"], _canonical(doc)) is None


def test_a_rotation_by_another_process_is_picked_up(tmp_path: Path) -> None:
    with MemoryService(tmp_path / "d") as running:
        made = running.bootstrap_owner()
        assert made is not None
        me = running.caller(made[0].id)
        mid = running.create_memory(me, {"name": "m"})["id"]
        running.remember(me, mid, {"content": "one"})
        with MemoryService(tmp_path / "d") as admin:
            new = admin.rotate_server_key()["keys"][-1]["key_id"]
        running.remember(me, mid, {"content": "two"})
        [sig] = running.changeset_signatures(me, mid, _head(running, mid))["signatures"]
        assert sig["key_id"] == new


def test_memory_git_commits_of_a_reviewed_write_are_signed(svc: MemoryService, owner: Caller,
                                                           mid: str) -> None:
    bot = agent(svc, owner, mid)
    ReviewedWrites(open_flow(svc)).put_settings(f"member:{owner.member.id}", mid,
                                                {"review_required": True})
    pending = svc.remember(bot, mid, {"content": "proposed by an agent"})
    doc = svc.changeset_signatures(owner, mid, pending["changeset_id"])
    assert [s["role"] for s in doc["signatures"]] == ["server"]
    assert doc["author"] == f"member:{bot.member.id}"


def test_a_member_signs_its_own_changeset(svc: MemoryService, owner: Caller, mid: str) -> None:
    bot = agent(svc, owner, mid)
    me = new_identity("bot")
    registered = svc.register_key(bot, {"public_key": me.public_key_text})
    assert registered["key_id"] == me.actor
    svc.remember(bot, mid, {"content": "signed by its writer too"})
    cid = _head(svc, mid)
    data = _canonical(svc.changeset_signatures(bot, mid, cid))
    doc = svc.sign_changeset(bot, mid, cid, {"public_key": me.public_key_text,
                                             "signature": b64_nopad(me.sign(data))})
    assert [(s["role"], s["signer"]) for s in doc["signatures"]] == [
        ("server", "server"), ("member", f"member:{bot.member.id}")]
    for s in doc["signatures"]:
        assert signing.problem(s["public_key"], s["signature"], data) is None


def test_member_signatures_that_do_not_hold_are_refused_and_not_kept(
        svc: MemoryService, owner: Caller, mid: str) -> None:
    bot, other = agent(svc, owner, mid), agent(svc, owner, mid, "agent-2")
    me, stranger = new_identity("bot"), new_identity("other")
    svc.register_key(bot, {"public_key": me.public_key_text})
    svc.register_key(other, {"public_key": stranger.public_key_text})
    svc.remember(bot, mid, {"content": "mine"})
    cid = _head(svc, mid)
    data = _canonical(svc.changeset_signatures(bot, mid, cid))

    def refused(caller: Caller, key: str, sig: bytes, words: str) -> None:
        with pytest.raises(InvalidInput, match=words):
            svc.sign_changeset(caller, mid, cid, {"public_key": key,
                                                  "signature": b64_nopad(sig)})

    refused(bot, me.public_key_text, me.sign(data + b" "), "does not verify")
    refused(bot, stranger.public_key_text, stranger.sign(data), "not registered to you")
    refused(other, stranger.public_key_text, stranger.sign(data), "only the author")
    svc.revoke_key(bot, me.actor)
    refused(bot, me.public_key_text, me.sign(data), "revoked")
    assert len(svc.changeset_signatures(owner, mid, cid)["signatures"]) == 1


def test_weak_and_malformed_keys_are_never_registered(svc: MemoryService, owner: Caller) -> None:
    for key, words in ((IDENTITY_POINT, "small-order"), (ORDER_EIGHT, "small-order"),
                       ("A" * 43, "public_key"), ("not base64!", "canonical")):
        with pytest.raises(InvalidInput, match=words):
            svc.register_key(owner, {"public_key": key})
    assert svc.list_keys(owner)["data"] == []
    good = new_identity("o").public_key_text
    svc.register_key(owner, {"public_key": good})
    with pytest.raises(Conflict):
        svc.register_key(owner, {"public_key": good})


def test_unknown_and_unreadable_changesets_look_alike(svc: MemoryService, owner: Caller,
                                                       mid: str) -> None:
    svc.remember(owner, mid, {"content": "private"})
    cid = _head(svc, mid)
    outsider = svc.caller(svc.create_member("outsider", "agent").id)
    with pytest.raises(NotFound) as hidden:
        svc.changeset_signatures(outsider, mid, cid)
    with pytest.raises(NotFound) as unknown:
        svc.changeset_signatures(owner, mid, "0" * 64)
    assert hidden.value.code == unknown.value.code == "memory_not_found"


def test_an_erased_payload_leaves_every_signature_verifiable(svc: MemoryService, owner: Caller,
                                                             mid: str) -> None:
    rid = svc.remember(owner, mid, {"content": "to be erased: Quillwort"})["id"]
    cid = _head(svc, mid)
    before = svc.changeset_signatures(owner, mid, cid)
    svc.erase(owner, mid, {"record_ids": [rid]})
    after = svc.changeset_signatures(owner, mid, cid)
    assert after == before
    cs = history.verify(svc._store.changeset(cid))
    assert history.canonical_bytes(cs) == _canonical(after)
