"""Hostile data kept under tests/adversarial/hn/ (see its README for why each must fail)."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from palimpsest.canonical import encode
from palimpsest.errors import InvalidInput
from palimpsest.hn import envelope as env
from palimpsest.hn import store
from palimpsest.identity import (
    b64_nopad,
    check_public_key,
    decode_public_key,
    fingerprint,
    identity_from_seed,
    weak_key_reason,
)
from tests.hn.helpers import golden_wire
from tests.hn.streams import memory_tree, new_repo, raw_commit

CORPUS = Path(__file__).resolve().parents[1] / "adversarial" / "hn"
ENVELOPES = sorted((CORPUS / "envelopes").glob("*_fail.json"))


def _weak_keys() -> list[bytes]:
    lines = (CORPUS / "weak-keys.txt").read_text().splitlines()
    return [
        bytes.fromhex(line.split("#")[0].strip()) for line in lines if line.split("#")[0].strip()
    ]


@pytest.mark.parametrize("path", ENVELOPES, ids=[p.name for p in ENVELOPES])
def test_hostile_envelope_refused(path: Path) -> None:
    with pytest.raises(InvalidInput) as info:
        env.decode_envelope(path.read_bytes())
    assert info.value.code in {
        "invalid-json",
        "invalid-memory",
        "non-canonical",
        "unsupported-protocol",
    }


def test_golden_envelope_in_corpus_is_accepted() -> None:
    data = (CORPUS / "envelopes" / "golden_ok.json").read_bytes()
    assert env.encode_envelope(env.decode_envelope(data)) == data
    assert len(ENVELOPES) >= 20


@pytest.mark.parametrize("key", _weak_keys(), ids=lambda k: k.hex()[:10])
def test_weak_key_refused_everywhere(key: bytes) -> None:
    assert weak_key_reason(key) is not None
    with pytest.raises(InvalidInput) as info:
        check_public_key(key)
    assert info.value.code == "weak-key"
    with pytest.raises(InvalidInput):
        decode_public_key(b64_nopad(key))


def test_forged_signature_under_small_order_key_is_refused(tmp_path: Path) -> None:
    """The R = identity, S = 0 forgery: refused by the reader because the key is weak."""
    key = bytes([1]) + bytes(31)
    actor = fingerprint(key)
    wire = golden_wire()
    wire.update(actor=actor, publicKey=b64_nopad(key), stream=env.default_stream(actor))
    payload = encode(wire)
    forged = env.sign_text(key + bytes(32))  # R = encoded identity point, S = 0
    with pytest.raises(InvalidInput) as info:
        env.decode_envelope(payload)
    assert info.value.code == "weak-key"
    repo = new_repo(tmp_path / "r")
    commit = raw_commit(repo, memory_tree(repo, payload, forged.encode()), [])
    repo.references.create(store.local_ref_name(actor, wire["stream"]), pygit2.Oid(hex=commit))
    with pytest.raises(InvalidInput, match="small-order"):
        store.collect(repo)


def test_random_keys_are_accepted() -> None:
    for seed in range(64):
        identity = identity_from_seed("x", bytes([seed]) * 32)
        assert weak_key_reason(identity.public_key) is None
