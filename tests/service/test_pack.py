"""The stored forms of documents and bodies (``service/storage/pack.py``): whatever goes in
comes back byte for byte, names the service mints are kept as their bytes, and a delta of its
bases keeps none of their words."""

from __future__ import annotations

import base64
import hashlib
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.service.storage.pack import DELTA, NAMES, PLAIN, pack, unpack


def minted(prefix: str = "hrec") -> str:
    return f"{prefix}_" + base64.b32encode(os.urandom(16)).decode().rstrip("=").lower()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_come_back(data: bytes) -> None:
    assert unpack(pack(data)) == data


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=40)
                    | st.sampled_from([minted(), "member:" + minted("hmbr"),
                                       hashlib.sha256(b"x").hexdigest(), "hrec_" + "a" * 26,
                                       "x" + hashlib.sha256(b"y").hexdigest()]),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20))
def test_any_json_comes_back(value: object) -> None:
    data = json.dumps(value, separators=(",", ":")).encode()
    assert unpack(pack(data)) == data


def test_minted_names_are_kept_as_their_bytes() -> None:
    digest = hashlib.sha256(b"body").hexdigest()
    rid, who = minted(), "member:" + minted("hmbr")
    doc = json.dumps({"body_digest": digest, "record_id": rid, "author": who}).encode()
    packed = pack(doc)
    assert packed[0] == NAMES
    assert bytes.fromhex(digest) not in packed  # deflated after the marks were made
    assert unpack(packed) == doc
    # a name that is not one the service mints (its last letter carries bits) stays text
    odd = json.dumps({"id": "hrec_" + "a" * 25 + "z"}).encode()
    assert unpack(pack(odd)) == odd


def test_bytes_json_never_holds_are_kept_plain() -> None:
    data = b'{"x":"\x00\x01"}'  # not canonical JSON: a mark would be ambiguous
    assert pack(data)[0] == PLAIN and unpack(pack(data)) == data


def test_a_delta_keeps_none_of_its_bases_words() -> None:
    words = " ".join(f"Quokka{n}fern" for n in range(4000)).encode()  # ~48 KB, past a window
    base = b'{"content":"' + words + b'","kind":"fact"}'
    body = b'{"type":"fact","title":null,"content":[{"type":"text","text":"' + words + b'"}]}'
    packed = pack(body, [base])
    assert packed[0] == DELTA and len(packed) < 100
    assert unpack(packed, [base]) == body


def test_damaged_bytes_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"damaged|unknown form"):
        unpack(b"\x03not deflate")
    with pytest.raises(ValueError, match="unknown form"):
        unpack(b'{"plain":"json"}')
