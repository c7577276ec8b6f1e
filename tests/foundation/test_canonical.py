"""Go-compatible encoder and strict decoder (hn-memory-v0.md §2, §26; security-tests §1.2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.canonical import (
    decode,
    decode_canonical,
    encode,
    encode_indent,
    encode_no_html,
    encode_str,
    encode_tree,
)
from palimpsest.errors import InvalidInput

CORPUS = Path(__file__).resolve().parents[1] / "adversarial" / "json"
FAIL = sorted(CORPUS.glob("*_fail.json"))
OK = sorted(CORPUS.glob("*_ok.json"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"', '"\\""'), ("\\", '"\\\\"'), ("\n\r\t", '"\\n\\r\\t"'), ("\b\f", '"\\b\\f"'),
        ("\x00\x01\x1f", '"\\u0000\\u0001\\u001f"'), ("<>&", '"\\u003c\\u003e\\u0026"'),
        ("\u2028\u2029", '"\\u2028\\u2029"'), ("\x7f", '"\x7f"'), ("é東京🐈", '"é東京🐈"'),
        ("\x1b", '"\\u001b"'), ("/", '"/"'),
    ],
)  # fmt: skip
def test_go_string_escaping(text: str, expected: str) -> None:
    assert encode(text) == expected.encode("utf-8")
    assert encode_str(text) == expected.encode("utf-8")
    assert decode(encode(text)) == text


def test_key_order_is_insertion_order_and_compact() -> None:
    assert encode({"b": 1, "a": [True, None, {}]}) == b'{"b":1,"a":[true,null,{}]}'


def test_indent_matches_go_marshal_indent() -> None:
    value = {"a": [], "b": {}, "c": [1, {"d": "<"}]}
    assert encode_indent(value) == (
        b'{\n  "a": [],\n  "b": {},\n  "c": [\n    1,\n    {\n      "d": "\\u003c"\n    }\n  ]\n}\n'
    )


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=120, deadline=None, derandomize=True)
@given(st.dictionaries(st.text(), _JSON, max_size=6))
def test_encode_tree_equals_encode(value: dict[str, object]) -> None:
    # Lone surrogates and every escape class come from st.text(); both refuse or both agree.
    try:
        expected = encode(value)
    except InvalidInput:
        with pytest.raises(InvalidInput):
            encode_tree(value)
        return
    assert encode_tree(value) == expected


def test_encode_tree_errors_match_encode() -> None:
    for value in ({"a": float("nan")}, {"a": object()}, {"a": "\ud800"}, "<top-level str>"):
        errors = []
        for fn in (encode, encode_tree):
            try:
                errors.append(fn(value))
            except InvalidInput as exc:
                errors.append((type(exc), str(exc)))
        assert errors[0] == errors[1]


def test_encode_refuses_lone_surrogate_and_nan() -> None:
    with pytest.raises(InvalidInput):
        encode("\ud800")
    # NaN arrives through MCP's JSON parser: one typed refusal, never a raw ValueError (found by
    # the service_bodies fuzz target, tests/adversarial/fuzz/service_bodies/nan-attribute.json)
    for value in (float("nan"), float("inf"), {"a": [float("-inf")]}, {"a": object()}):
        for fn in (encode, encode_tree, encode_no_html):
            with pytest.raises(InvalidInput) as exc:
                fn(value)
            assert exc.value.code == "invalid-json"


@pytest.mark.parametrize("path", FAIL, ids=[p.name for p in FAIL])
def test_hostile_json_corpus_refused(path: Path) -> None:
    with pytest.raises(InvalidInput) as info:
        decode(path.read_bytes())
    assert info.value.code == "invalid-json"


@pytest.mark.parametrize("path", OK, ids=[p.name for p in OK])
def test_ok_corpus_decodes_like_json(path: Path) -> None:
    data = path.read_bytes()
    assert decode(data) == json.loads(data)


def test_corpus_is_present() -> None:
    assert len(FAIL) >= 20 and OK


def test_max_bytes_and_trailing_whitespace() -> None:
    with pytest.raises(InvalidInput, match="exceeds 3 bytes"):
        decode(b"1234", max_bytes=3)
    assert decode(b'{"a":1}\n', trailing_whitespace=True) == {"a": 1}
    with pytest.raises(InvalidInput):
        decode(b'{"a":1}\n')
    with pytest.raises(InvalidInput):
        decode(b'{"a":1}\nx', trailing_whitespace=True)


def test_integer_range() -> None:
    assert decode(b"18446744073709551615") == 2**64 - 1
    assert decode(b"-5") == -5
    with pytest.raises(InvalidInput):
        decode(b"1" * 21)


def test_error_position_is_a_byte_offset() -> None:
    with pytest.raises(InvalidInput, match="byte offset 8"):
        decode('{"é":1,,}'.encode())


@pytest.mark.parametrize(
    "data",
    [b'{"a":1, "b":2}', b'{"b":1,"a":2}x', b'"\\u00e9"', b'"<"', b'"\\/"', b"1.0", b" 1", b"-0"],
)
def test_decode_canonical_refuses_non_canonical(data: bytes) -> None:
    with pytest.raises(InvalidInput):
        decode_canonical(data)


def test_decode_canonical_accepts_canonical_and_refuses_surrogates() -> None:
    assert decode_canonical(b'{"b":1,"a":"\\u003c\xc3\xa9"}') == {"b": 1, "a": "<é"}
    with pytest.raises(InvalidInput):
        decode_canonical(b'"\\ud800"')
    with pytest.raises(InvalidInput) as info:
        decode_canonical(b'{"a": 1}')
    assert info.value.code == "non-canonical"
