"""Receipts: ``include: ["provenance"]`` on get, list, recall, graph and prime; each verifies
offline against the published keys, and every tampering of the hostile corpus is refused by
name."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from palimpsest import canonical
from palimpsest.identity import b64_nopad, import_document, new_identity, read_private
from palimpsest.service import MemoryService
from palimpsest.service.memorygit.reviewed import ReviewedWrites
from palimpsest.service.memorygit.wiring import open_flow
from palimpsest.service.model import Caller
from palimpsest.service.provenance import receipt, signing
from palimpsest.service.provenance.keys import DIRECTORY, KEY_FILE
from tests.api.server import pal_command
from tests.provenance.conftest import agent

CASES = json.loads((Path(__file__).resolve().parents[1] / "adversarial" / "provenance"
                    / "receipts.json").read_text())
P = ["provenance"]


def _keys(svc: MemoryService) -> dict[str, str]:
    return signing.trusted_keys(svc.provenance_keys())


def _standing(svc: MemoryService, owner: Caller, mid: str) -> dict[str, Any]:
    rid = svc.remember(owner, mid, {"type": "fact", "title": "build",
                                    "content": "the build runs on Debian",
                                    "attributes": {"standing": True}})["id"]
    return svc.get_record(owner, mid, rid, include=P)


def test_every_read_can_carry_receipts_that_verify(svc: MemoryService, owner: Caller,
                                                   mid: str) -> None:
    first = _standing(svc, owner, mid)
    svc.remember(owner, mid, {"type": "fact", "content": "releases are on Tuesdays",
                              "references": [{"rel": "about", "record_id": first["id"]}]})
    keys = _keys(svc)
    answers = {
        "get": [first],
        "list": svc.list_records(owner, mid, include="active,provenance")["data"],
        "recall": [r["record"] for r in svc.recall(owner, mid, {"query": "build releases",
                                                                 "include": P})["results"]],
        "graph": [n["record"] for n in svc.graph(owner, mid, {"include": P})["nodes"]],
        "prime": svc.prime(owner, mid, 4000, include="provenance")["provenance"],
    }
    for name, records in answers.items():
        assert records, name
        for rec in records:
            report = receipt.check(rec, keys)
            assert report["ok"] and report["signatures"] == ["server"], name
            assert report["record_checked"] is (name != "prime")
    # without the word, nothing changes
    assert "provenance" not in svc.get_record(owner, mid, first["id"])
    assert all("provenance" not in r for r in svc.list_records(owner, mid)["data"])


def test_a_receipt_names_the_version_its_changeset_made(svc: MemoryService, owner: Caller,
                                                        mid: str) -> None:
    rid = svc.remember(owner, mid, {"content": "first words"})["id"]
    svc.revise(owner, mid, rid, {"content": "second words", "reason": "corrected"})
    now = svc.get_record(owner, mid, rid, include=P)
    assert now["version"] == 2 and receipt.check(now, _keys(svc))["ok"]
    content = json.loads(base64.b64decode(now["provenance"]["changeset"]["canonical"]))
    assert content["ops"][now["provenance"]["op"]]["op_type"] == "revise_record"
    assert now["provenance"]["changeset"]["id"] != \
        svc.get_record(owner, mid, rid, include=P, as_of=None)["provenance"]["issued_at"]


def test_a_reviewed_write_carries_its_review(svc: MemoryService, owner: Caller,
                                             mid: str) -> None:
    bot = agent(svc, owner, mid)
    flow = open_flow(svc)
    me = f"member:{owner.member.id}"
    ReviewedWrites(flow).put_settings(me, mid, {"review_required": True})
    pending = svc.remember(bot, mid, {"title": "deploys", "content": "deploys need two people"})
    flow.review(me, pending["proposal_id"], {"verdict": "approve"})
    authorization = flow.authorize(me, pending["proposal_id"], {})
    merged = flow.merge(me, mid, authorization)
    rec = svc.get_record(owner, mid, pending["memory_id"], include=P)
    review = rec["provenance"]["review"]
    assert review["proposal_id"] == pending["proposal_id"]
    assert review["originator"] == f"member:{bot.member.id}"
    assert review["reviewer"] == review["merger"] == me
    assert review["merge_authorization_id"] == merged["advance"]["authorization_nonce"]
    report = receipt.check(rec, _keys(svc))
    assert report["review"] == review and rec["written_by"]["id"] == bot.member.id
    # a direct write in the same memory names no review
    direct = svc.remember(owner, mid, {"content": "an owner's own write"})
    assert svc.get_record(owner, mid, direct["id"], include=P)["provenance"]["review"] is None


def test_receipts_of_history_signed_before_a_rotation_verify(svc: MemoryService, owner: Caller,
                                                             mid: str) -> None:
    rec = _standing(svc, owner, mid)
    svc.rotate_server_key()
    again = svc.get_record(owner, mid, rec["id"], include=P)
    prov = again["provenance"]
    assert prov["signatures"][0]["key_id"] != prov["receipt_signature"]["key_id"]
    assert receipt.check(again, _keys(svc))["ok"]
    # a verifier holding only the new key refuses the old signature by name
    only_new = {k: v for k, v in _keys(svc).items() if k == prov["receipt_signature"]["key_id"]}
    with pytest.raises(receipt.Refused) as refused:
        receipt.check(again, only_new)
    assert refused.value.part == "changeset signature"


def _edit(doc: dict[str, Any], case: dict[str, Any]) -> None:
    *where, last = case["path"]
    parent: Any = doc
    for step in where:
        parent = parent[step]
    op = case["op"]
    if op == "set":
        parent[last] = copy.deepcopy(case["value"])
    elif op == "delete":
        del parent[last]
    elif op == "flip":
        text = parent[last]
        pos = len(text) // 2
        parent[last] = text[:pos] + ("B" if text[pos] != "B" else "C") + text[pos + 1:]
    elif op == "rehash":
        data = base64.b64decode(parent[last]).replace(b'"message":"remember"',
                                                      b'"message":"tampered"')
        assert data != base64.b64decode(parent[last])
        parent[last] = base64.b64encode(data).decode()
        cid = hashlib.sha256(data).hexdigest()
        parent["id"], parent["digest"] = cid, f"sha256:{cid}"
    elif op == "stranger":
        stranger = new_identity("stranger")
        target = parent[last]
        if "role" in target:  # a changeset signature: over the changeset's bytes
            data = base64.b64decode(doc["provenance"]["changeset"]["canonical"])
        else:  # the receipt's own signature
            body = {k: v for k, v in doc["provenance"].items() if k != "receipt_signature"}
            data = receipt.RECEIPT_DOMAIN + canonical.encode(body)
            target["key_id"] = stranger.actor
        target["public_key"] = stranger.public_key_text
        target["signature"] = b64_nopad(stranger.sign(data))
    else:
        raise AssertionError(f"unknown op {op}")


def _resign(doc: dict[str, Any], data_dir: Path) -> None:
    key = import_document(read_private(data_dir / DIRECTORY / KEY_FILE))
    body = {k: v for k, v in doc["provenance"].items() if k != "receipt_signature"}
    sig = key.sign(receipt.RECEIPT_DOMAIN + canonical.encode(body))
    doc["provenance"]["receipt_signature"] = {"key_id": key.actor,
                                              "public_key": key.public_key_text,
                                              "algorithm": "ed25519",
                                              "signature": b64_nopad(sig)}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_tampered_receipts_are_refused_by_name(svc: MemoryService, owner: Caller, mid: str,
                                               case: dict[str, Any]) -> None:
    genuine = _standing(svc, owner, mid)
    keys = _keys(svc)
    assert receipt.check(genuine, keys)["ok"]
    doc = copy.deepcopy(genuine)
    _edit(doc, case)
    if case["resign"]:
        _resign(doc, svc.data_dir)
    with pytest.raises(receipt.Refused) as refused:
        receipt.check(doc, keys)
    assert refused.value.part == case["expect"], str(refused.value)
    assert str(refused.value).startswith(case["expect"] + ": ")


def test_pal_verify_receipt_offline(svc: MemoryService, owner: Caller, mid: str,
                                    tmp_path: Path) -> None:
    rec = _standing(svc, owner, mid)
    keys = tmp_path / "keys.json"
    keys.write_bytes(canonical.encode(svc.provenance_keys()))
    good = tmp_path / "record.json"
    good.write_text(json.dumps(rec))
    done = subprocess.run(pal_command("verify", "receipt", str(good), "--keys", str(keys),
                                      "--json"), capture_output=True, check=True)
    assert json.loads(done.stdout)["ok"] is True
    rec["content"][0]["text"] = "the build runs on Windows"
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(rec))
    done = subprocess.run(pal_command("verify", "receipt", str(bad), "--keys", str(keys)),
                          capture_output=True, check=False)
    assert done.returncode == 1
    assert done.stderr.decode().startswith("pal: record content: it does not match")
    missing = subprocess.run(pal_command("verify", "receipt", str(good)), capture_output=True,
                             check=False)
    assert missing.returncode == 1 and b"--keys" in missing.stderr
