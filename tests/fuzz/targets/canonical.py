"""Fuzz target ``canonical``: the strict JSON decoder and the canonical form (security-tests A1-A3).

Input: raw bytes, handed to every decoding entry of :mod:`palimpsest.canonical` — ``decode``
(plain, ``trailing_whitespace``, ``allow_floats``), ``decode_canonical`` and the reader's fast
``decode_then_compare``.

Expected refusals: ``InvalidInput`` with code ``invalid-json`` (every decoder) or
``non-canonical`` (``decode_canonical`` only). Anything else escaping is a finding.

Oracle for what is accepted:

- the strict decoders accept only valid UTF-8 without a BOM, and agree with an independent parse
  (``json.loads`` with a duplicate-key check) on the value; strict mode holds no float, no
  integer longer than 20 digits, no lone surrogate;
- the value re-encodes (``encode``, ``encode_indent``, ``encode_no_html``) and decodes back to
  itself, and ``encode``'s bytes pass ``decode_canonical``;
- ``decode_canonical`` accepts exactly the bytes ``encode`` reproduces;
- ``trailing_whitespace`` admits nothing but JSON white space after the value;
- whatever the strict decoder accepts, ``decode_then_compare`` accepts with the same value.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tests.fuzz.harness import Finding, Refused, Target, check, files, instrumented, refusals, texts

with instrumented():
    from palimpsest.canonical import (
        decode,
        decode_canonical,
        decode_then_compare,
        encode,
        encode_indent,
        encode_no_html,
    )
    from palimpsest.errors import InvalidInput

JSON_REFUSALS = refusals({InvalidInput: {"invalid-json"}})
CANONICAL_REFUSALS = refusals({InvalidInput: {"invalid-json", "non-canonical"}})
_WHITESPACE = b" \t\r\n"


def _pairs_no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    check(len(set(keys)) == len(keys), "a decoder accepted a duplicate key")
    return dict(pairs)


def _walk(value: Any) -> list[Any]:
    out, stack = [], [value]
    while stack:
        item = stack.pop()
        out.append(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


def _same(left: Any, right: Any) -> bool:
    """Equality that also tells 1 from 1.0 and True from 1, and keeps key order (iterative:
    accepted values may nest almost as deep as the recursion limit)."""
    stack = [(left, right)]
    while stack:
        a, b = stack.pop()
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            if list(a) != list(b):
                return False
            stack.extend((a[k], b[k]) for k in a)
        elif isinstance(a, list):
            if len(a) != len(b):
                return False
            stack.extend(zip(a, b, strict=True))
        elif a != b:
            return False
    return True


def _encodable(value: Any) -> bool:
    try:
        encode(value)
    except (InvalidInput, ValueError, TypeError, RecursionError):
        return False
    return True


def _short_ints(value: Any) -> bool:
    return all(
        len(str(abs(item))) <= 20
        for item in _walk(value)
        if isinstance(item, int) and not isinstance(item, bool)
    )


def _check_strict_value(data: bytes, value: Any, *, floats: bool) -> None:
    check(not data.startswith(b"\xef\xbb\xbf"), "a decoder accepted a byte order mark")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Finding("a decoder accepted invalid UTF-8") from exc
    try:
        independent = json.loads(text, object_pairs_hook=_pairs_no_duplicates)
    except RecursionError:  # the independent parser is the limit here, not the decoder
        return
    check(_same(independent, value), "the decoded value differs from an independent parse")
    for item in _walk(value):
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise Finding("a decoder accepted a lone surrogate") from exc
        elif isinstance(item, float):
            check(floats, "the integer-only decoder accepted a float")
            check(math.isfinite(item), "a decoder accepted a non-finite number")
        elif isinstance(item, int) and not isinstance(item, bool):
            check(len(str(abs(item))) <= 20, "a decoder accepted an integer over 20 digits")
    compact = encode(value)
    check(_same(decode(compact, allow_floats=floats), value), "encode/decode is not a round trip")
    if not floats:
        check(_same(decode_canonical(compact), value), "encode's bytes are not canonical")
    indented = encode_indent(value)
    check(_same(decode(indented, trailing_whitespace=True, allow_floats=floats), value),
          "encode_indent/decode is not a round trip")  # fmt: skip
    check(_same(decode(encode_no_html(value), allow_floats=floats), value),
          "encode_no_html/decode is not a round trip")  # fmt: skip


def one_input(data: bytes) -> None:
    strict = JSON_REFUSALS.attempt(decode, data)
    floats = JSON_REFUSALS.attempt(decode, data, allow_floats=True)
    fast = JSON_REFUSALS.attempt(decode_then_compare, data)
    if not isinstance(strict, Refused):
        _check_strict_value(data, strict, floats=False)
        check(_same(fast, strict), "decode_then_compare and decode disagree on the value")
    if not isinstance(floats, Refused):
        _check_strict_value(data, floats, floats=True)
        check(_same(fast, floats), "decode_then_compare and decode disagree on the value")
    else:
        check(isinstance(strict, Refused), "allow_floats refused what decode accepts")
        if not isinstance(fast, Refused) and _encodable(fast) and _short_ints(fast):
            # Lenient by design (NaN, duplicates, white space), sound only with the byte
            # comparison its callers make: what the strict decoder refuses as JSON must never
            # re-encode to the same bytes. (Integer ranges are the callers' to check: the
            # envelope bounds ``sequence``, see the ``envelope`` target.)
            check(encode(fast) != data, "decode_then_compare + byte comparison accepts JSON "
                  "the strict decoder refuses")  # fmt: skip

    trailing = JSON_REFUSALS.attempt(decode, data, trailing_whitespace=True)
    if not isinstance(trailing, Refused):
        again = JSON_REFUSALS.attempt(decode, data.rstrip(_WHITESPACE))
        check(not isinstance(again, Refused) and _same(again, trailing),
              "trailing_whitespace admitted more than white space after the value")  # fmt: skip
    else:
        check(isinstance(strict, Refused), "trailing_whitespace refused what decode accepts")

    canonical = CANONICAL_REFUSALS.attempt(decode_canonical, data)
    if not isinstance(canonical, Refused):
        check(not isinstance(strict, Refused), "decode_canonical accepted what decode refuses")
        check(encode(canonical) == data, "decode_canonical accepted non-canonical bytes")
    elif canonical.code == "non-canonical":
        check(not isinstance(strict, Refused), "non-canonical for bytes decode refuses")
        check(encode(strict) != data, "canonical bytes were called non-canonical")
    else:
        check(isinstance(strict, Refused), "decode_canonical: invalid-json for valid JSON")


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("json", "hn/envelopes", "fuzz/canonical"),
        *texts("canonical/literal", ['{"a":[1,-2,"\\u00e9",true,false,null,{}]}', "[1.5e3]",
                                      '"\\ud83d\\ude00"', ' {"b" : 1 } \n', "-0", "[[[[]]]]"]),
    ]  # fmt: skip


TARGET = Target(
    name="canonical",
    one_input=one_input,
    refusals=CANONICAL_REFUSALS,
    seeds=seeds,
    classes=("A1", "A2", "A3"),
    runs=20_000,
    max_len=4096,
    summary="strict JSON decoder, canonical form, fast reader decode (palimpsest.canonical)",
)

if __name__ == "__main__":
    TARGET.fuzz()
