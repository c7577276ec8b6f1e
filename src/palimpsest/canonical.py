"""Strict JSON: a Go-compatible canonical encoder and a decoder that refuses ambiguity.

The encoder reproduces Go's ``encoding/json.Marshal`` (HTML-safe escaping, raw non-ASCII UTF-8,
struct field order = the insertion order of the dicts it is given) and ``MarshalIndent`` with a
two-space indent.  Callers build dicts in wire order; nothing here sorts keys.

The decoder is the only place that parses untrusted JSON.  It refuses what Python's ``json``
quietly accepts (hn-memory-v0.md §26, security-tests.md §1.2): a BOM, invalid UTF-8, encoded or
escaped lone surrogates, ``NaN``/``Infinity``, floats where integers are expected, duplicate keys,
trailing bytes, oversized integers and runaway nesting.  Every failure is one
:class:`~palimpsest.errors.InvalidInput` with code ``invalid-json``.

This module does not validate schemas; callers check fields.  It keeps no state.
"""

from __future__ import annotations

import json
import math
from json import encoder as _json_encoder

from palimpsest.errors import InvalidInput

TYPE_CHECKING = False  # typing stays unimported at run time (the warm recall's start-up)
if TYPE_CHECKING:
    from typing import Any

    JSONValue = Any  # dict[str, JSONValue] | list[JSONValue] | str | int | bool | None

_MAX_INT_DIGITS = 20  # uint64 has 20 decimal digits; anything longer is refused before int()
_HTML_ESCAPES = (
    ("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)  # fmt: skip
# Go with SetEscapeHTML(false) (upstream canonical.JSON) still escapes U+2028 and U+2029.
_LINE_SAFE = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029"})
_BOM = b"\xef\xbb\xbf"


def _refuse(reason: str) -> InvalidInput:
    return InvalidInput(f"invalid JSON: {reason}", code="invalid-json")


# One encoder instance: json.dumps with options builds a new encoder on every call.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode(value: JSONValue) -> bytes:
    """Encode like Go ``json.Marshal``: compact, HTML-safe escapes, raw non-ASCII UTF-8.

    Raises:
        InvalidInput: the value holds a lone surrogate, NaN, an infinity or a non-JSON type.
    """
    try:
        text = _COMPACT.encode(value)
    except (ValueError, TypeError) as exc:  # json's own words: NaN, inf, an unknown type
        raise _refuse(_json_refusal(exc)) from exc
    return _finish(text)


def _json_refusal(exc: Exception) -> str:
    # Found by fuzzing (service_bodies): NaN from an MCP argument escaped as ValueError.
    if isinstance(exc, TypeError):
        return "a value is not a JSON type"
    return "NaN and infinities are not JSON" if "float" in str(exc) else "a value is circular"


def _refuse_type(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The same encoding as _COMPACT, built once and without the circular-reference table, for the
# reader's hot path (the canonical re-encoding of every stored memory): a value that is a tree
# (freshly decoded JSON, or dicts and lists built for one call) cannot be circular.
_C_MAKE_ENCODER = getattr(_json_encoder, "c_make_encoder", None)  # None without the C module
_TREE_ENCODER = (
    None
    if _C_MAKE_ENCODER is None
    else _C_MAKE_ENCODER(
        None, _refuse_type, _json_encoder.encode_basestring, None, ":", ",", False, False, False
    )
)


def encode_tree(value: JSONValue) -> bytes:
    """:func:`encode` for a value known to be a tree (no container reachable twice).

    Same bytes and errors as :func:`encode`; it only skips the circular-reference bookkeeping,
    so a circular value would raise ``RecursionError`` here instead of ``InvalidInput``.

    Raises:
        InvalidInput: the value holds a lone surrogate, NaN, an infinity or a non-JSON type.
    """
    if _TREE_ENCODER is None or value.__class__ is not dict:
        return encode(value)
    try:
        text = "".join(_TREE_ENCODER(value, 0))
    except (ValueError, TypeError) as exc:
        raise _refuse(_json_refusal(exc)) from exc
    return _finish(text)


def encode_no_html(value: JSONValue) -> bytes:
    """Encode like Go's encoder with ``SetEscapeHTML(false)`` and the trailing newline stripped.

    ``<``, ``>`` and ``&`` stay raw; U+2028/U+2029 are still escaped (memory-git.md §11).

    Raises:
        InvalidInput: the value holds a lone surrogate, NaN, an infinity or a non-JSON type.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError) as exc:
        raise _refuse(_json_refusal(exc)) from exc
    try:
        return text.translate(_LINE_SAFE).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _refuse("a string holds a lone surrogate") from exc


def encode_indent(value: JSONValue) -> bytes:
    """Encode like Go ``json.MarshalIndent(v, "", "  ")`` followed by one LF."""
    text = json.dumps(value, ensure_ascii=False, indent=2, separators=(",", ": "), allow_nan=False)
    return _finish(text) + b"\n"


def encode_str(value: str) -> bytes:
    """Encode one string as a Go JSON string literal (used for byte budgets)."""
    return encode(value)


def _finish(text: str) -> bytes:
    # '<', '>', '&', U+2028 and U+2029 occur only inside string literals, so replacing them after
    # encoding escapes exactly what Go escapes.  One ``str.replace`` per character present: a
    # dict-table ``str.translate`` walks a long non-ASCII text in Python-level steps (about
    # 30x slower for a few hundred characters).
    for char, escape in _HTML_ESCAPES:
        if char in text:
            text = text.replace(char, escape)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _refuse("a string holds a lone surrogate") from exc


def _pairs(pairs: list[tuple[str, JSONValue]]) -> dict[str, JSONValue]:
    out: dict[str, JSONValue] = {}
    for key, value in pairs:
        if key in out:
            raise _refuse(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> JSONValue:
    raise _refuse(f"{name} is not JSON")


def _no_float(text: str) -> JSONValue:
    raise _refuse("only integers are allowed as numbers")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise _refuse("integer out of range")
    return int(text)


def _finite_float(text: str) -> float:
    if len(text) > _MAX_FLOAT_CHARS:
        raise _refuse("number is too long")
    value = float(text)
    if not math.isfinite(value):
        raise _refuse("number out of range")
    return value


_MAX_FLOAT_CHARS = 64
_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs,
    parse_constant=_no_constant,
    parse_float=_no_float,
    parse_int=_bounded_int,
)


# Service request bodies (attributes, filter values) may carry finite fractional numbers.
_FLOAT_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs,
    parse_constant=_no_constant,
    parse_float=_finite_float,
    parse_int=_bounded_int,
)


def _check_surrogates(value: JSONValue) -> None:
    # Escaped lone surrogates ("\ud800") survive json parsing as str; find them without
    # recursion limits by walking an explicit stack.
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise _refuse("lone surrogate in a string") from exc
        elif isinstance(item, dict):
            for key, sub in item.items():
                stack.append(key)
                stack.append(sub)
        elif isinstance(item, list):
            stack.extend(item)


def decode(
    data: bytes,
    *,
    max_bytes: int | None = None,
    trailing_whitespace: bool = False,
    check_surrogates: bool = True,
    allow_floats: bool = False,
) -> JSONValue:
    """Decode exactly one strict JSON value from ``data``.

    ``trailing_whitespace`` lets a request file end with a newline; signed payloads never do.
    ``check_surrogates=False`` skips the walk for escaped lone surrogates; only callers that
    re-encode the value afterwards (which refuses them) may use it, to keep hot paths lean.
    ``allow_floats`` admits finite fractional numbers (HTTP request bodies); signed payloads
    never carry them.

    Raises:
        InvalidInput: code ``invalid-json`` for every refusal listed in the module docstring.
    """
    if max_bytes is not None and len(data) > max_bytes:
        raise _refuse(f"input exceeds {max_bytes} bytes")
    if data.startswith(_BOM):
        raise _refuse("byte order mark is not allowed")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse("input is not valid UTF-8") from exc
    try:
        value, end = (_FLOAT_DECODER if allow_floats else _DECODER).raw_decode(text)
    except InvalidInput:
        raise
    except json.JSONDecodeError as exc:
        raise _refuse(f"{exc.msg} at byte offset {len(text[: exc.pos].encode('utf-8'))}") from exc
    except RecursionError as exc:
        raise _refuse("nesting is too deep") from exc
    except ValueError as exc:  # int() limits and similar
        raise _refuse(str(exc)) from exc
    rest = text[end:]
    if rest and not (trailing_whitespace and not rest.strip(" \t\r\n")):
        raise _refuse("trailing data after the JSON value")
    if check_surrogates:
        _check_surrogates(value)
    return value


_PLAIN = json.JSONDecoder()


def decode_then_compare(data: bytes) -> JSONValue:
    """Parse ``data`` with the C scanner only, for callers that then require byte equality.

    This is **not** a strict decoder on its own: like ``json.loads`` it keeps the last of
    duplicate keys, accepts ``NaN`` and surrounding whitespace.  It is sound only when the caller
    re-encodes the validated value and refuses it unless the bytes equal ``data`` exactly (as
    ``hn-memory/0`` readers do, §2): a duplicate key, a constant, whitespace or any other
    non-canonical form then cannot produce equal bytes.  It exists because the per-hook strict
    decoder costs more than the rest of the memory reader's per-payload work.

    Raises:
        InvalidInput: ``invalid-json`` for invalid UTF-8, syntax errors and runaway nesting.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse("input is not valid UTF-8") from exc
    try:
        value, end = _PLAIN.raw_decode(text)
    except RecursionError as exc:
        raise _refuse("nesting is too deep") from exc
    except ValueError as exc:  # JSONDecodeError and int() digit limits
        raise _refuse("syntax error") from exc
    if end != len(text):
        raise _refuse("trailing data after the JSON value")
    return value


def decode_canonical(data: bytes, *, max_bytes: int | None = None) -> JSONValue:
    """Decode strictly and require that Go-style re-encoding reproduces ``data`` exactly.

    Raises:
        InvalidInput: ``invalid-json`` as for :func:`decode`; ``non-canonical`` when the bytes
            are valid JSON but not in canonical form (whitespace, key order, escapes).
    """
    # encode() refuses lone surrogates, so the separate walk is unnecessary here.
    value = decode(data, max_bytes=max_bytes, check_surrogates=False)
    if encode(value) != data:
        raise InvalidInput("JSON is not canonical", code="non-canonical")
    return value


__all__ = [
    "JSONValue",
    "decode",
    "decode_canonical",
    "decode_then_compare",
    "encode",
    "encode_indent",
    "encode_no_html",
    "encode_str",
    "encode_tree",
]
