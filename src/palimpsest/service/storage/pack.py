"""How the embedded store keeps documents and bodies on disk: deflated, as Git keeps objects.

A content-addressed value keeps its name — the SHA-256 of its canonical bytes — and is stored
compressed; reading it back gives the canonical bytes again, which still hash to the name.
Three forms, told apart by their first byte:

- ``1``: raw deflate against a preset dictionary of the service's own JSON skeleton (the keys
  and constant values of changesets, record bodies and payloads), so a small document pays
  little for its structure;
- ``3``: the same, after the names the service mints are turned back into the bytes they
  spell — a string that is a hex SHA-256 into its 32 bytes, one that is an id such as
  ``hrec_<26 base32 letters>`` (or a principal ``member:hmbr_…``) into its prefix and 16
  bytes — marked by a byte canonical JSON never holds (it escapes every control character),
  so the text comes back exactly (deflate cannot shrink random hex below the 8 bits a letter
  costs in a short document);
- ``2``: a *delta* against other stored values (its bases: the payload a merged record was
  derived from, the version it revises), copies of their byte ranges and the bytes in
  between, deflated like ``1``. A merged record repeats its payload's words; stored this way
  they take their space once. Reading needs the bases' bytes.

Changing either form is a new schema version: stored bytes must stay readable.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Final

PLAIN: Final = 1
DELTA: Final = 2
NAMES: Final = 3
# A JSON string that is (or ends ``:`` and is, like ``member:hmbr_…``) a hex SHA-256 or a
# minted id; one pass over the text, so a mark is only ever made of the text's own letters.
_NAME: Final = re.compile(rb'([":])(?:([0-9a-f]{64})|([a-z]{2,8}_)([a-z2-7]{26}))(?=")')
_MARKED: Final = re.compile(rb"\x00(.{32})|\x01(.{16})", re.DOTALL)
_MIN_COPY: Final = 8  # shorter common runs are cheaper as literals (and rarely words)
# The service's own JSON skeleton. Deflate reaches back 32 KiB; this stays far below.
DICTIONARY: Final = (
    b'{"type":"note","title":null,"content":[{"type":"text","text":"'
    b'"}],"attributes":{},"references":[],"valid_from":null,"valid_to":null}'
    b'{"ref_name":"refs/shared/main","parent_ids":[],"author_principal":"member:hmbr_'
    b'","message":"remember","created_at":"2026-12-01T00:00:00.000000Z","idempotency_key":"'
    b'","ops":[{"ordinal":0,"op_type":"add_record","payload":{"record_id":"hrec_'
    b'","body_digest":"","written_at":"2026-12-01T00:00:00.000000Z","written_by":'
    b'{"kind":"member","id":"hmbr_","type":"human"}}}]}'
    b'{"ordinal":1,"op_type":"revise_record","target_event_id":"hrec_","payload_digest":"'
    b'"forget_record""erase_record""add_memory""resulting_event_id":"memory_id"'
    b'"kind":"fact","scope":"","summary":"","tags":[],"confidence":"source_trust":'
    b'"memory_git_id":"episode","fact"'
)


def _deflate(data: bytes) -> bytes:
    # a 4 KiB window and small hash tables: the same bytes for documents this size, at a
    # tenth of the set-up cost of the defaults (which allocate for megabytes)
    c = zlib.compressobj(9, zlib.DEFLATED, -12, 4, zlib.Z_DEFAULT_STRATEGY, zdict=DICTIONARY)
    return c.compress(data) + c.flush()


def _inflate(data: bytes) -> bytes:
    d = zlib.decompressobj(-15, zdict=DICTIONARY)
    return d.decompress(data) + d.flush()


_B32: Final = "abcdefghijklmnopqrstuvwxyz234567"
_B32_AS_DIGITS: Final = bytes.maketrans(_B32.encode("ascii"),
                                        b"0123456789abcdefghijklmnopqrstuv")
_B32_PAIRS: Final = [a + b for a in _B32 for b in _B32]  # ten bits at a time
_LETTERS: Final = re.compile(rb"[a-z2-7]{26}")


def id_bytes(letters: bytes | str) -> bytes | None:
    """The 16 bytes 26 lower-case base32 letters spell, as :func:`palimpsest.service.core.mint`
    writes them; ``None`` when they are not such a spelling (its last letter carries bits)."""
    data = letters.encode("ascii", "replace") if isinstance(letters, str) else letters
    if not _LETTERS.fullmatch(data):
        return None
    n = int(data.translate(_B32_AS_DIGITS), 32)
    return None if n & 3 else (n >> 2).to_bytes(16, "big")


def id_letters(raw: bytes) -> str:
    """The inverse of :func:`id_bytes`."""
    n = int.from_bytes(raw, "big") << 2
    return "".join(_B32_PAIRS[n >> s & 1023] for s in range(120, -1, -10))


def _name_bytes(match: re.Match[bytes]) -> bytes:
    if match.group(2) is not None:
        return match.group(1) + b"\x00" + bytes.fromhex(match.group(2).decode("ascii"))
    raw = id_bytes(match.group(4))
    if raw is None:
        return match.group(0)  # not a name the service minted: kept as it is
    return match.group(1) + match.group(3) + b"\x01" + raw


def _marked(match: re.Match[bytes]) -> bytes:
    if match.group(1) is not None:
        return match.group(1).hex().encode("ascii")
    return id_letters(match.group(2)).encode("ascii")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return n, at


def _delta(data: bytes, base: bytes) -> bytes:
    """``data`` as copies from ``base`` and literal runs: ``0 len bytes`` | ``1 offset len``."""
    index: dict[bytes, int] = {}
    for i in range(len(base) - _MIN_COPY, -1, -1):  # the first offset of each window wins
        index[base[i:i + _MIN_COPY]] = i
    out = bytearray()
    literal = 0  # where the pending literal run starts
    p = 0
    while p + _MIN_COPY <= len(data):
        at = index.get(data[p:p + _MIN_COPY])
        if at is None:
            p += 1
            continue
        end = p + _MIN_COPY
        src = at + _MIN_COPY
        while end < len(data) and src < len(base) and data[end] == base[src]:
            end += 1
            src += 1
        if p > literal:
            out += b"\x00" + _varint(p - literal) + data[literal:p]
        out += b"\x01" + _varint(at) + _varint(end - p)
        p = literal = end
    if len(data) > literal:
        out += b"\x00" + _varint(len(data) - literal) + data[literal:]
    return bytes(out)


def _undelta(delta: bytes, base: bytes) -> bytes:
    out = bytearray()
    at = 0
    while at < len(delta):
        kind = delta[at]
        if kind == 0:
            size, at = _read_varint(delta, at + 1)
            out += delta[at:at + size]
            at += size
        else:
            offset, at = _read_varint(delta, at + 1)
            size, at = _read_varint(delta, at)
            out += base[offset:offset + size]
    return bytes(out)


def pack(data: bytes, bases: Sequence[bytes] = ()) -> bytes:
    """The stored form of ``data``: a delta against ``bases`` when there are any, else plain."""
    if bases:
        return bytes([DELTA]) + _deflate(_delta(data, b"".join(bases)))
    if b"\x00" in data or b"\x01" in data:  # not canonical JSON: the marks would be ambiguous
        return bytes([PLAIN]) + _deflate(data)
    return bytes([NAMES]) + _deflate(_NAME.sub(_name_bytes, data))


def unpack(blob: bytes, bases: Sequence[bytes] = ()) -> bytes:
    """The bytes :func:`pack` was given (``bases`` as they were then, for a delta).

    Raises:
        ValueError: not a form this module wrote (damaged bytes).
    """
    try:
        if blob[:1] == bytes([NAMES]):
            return _MARKED.sub(_marked, _inflate(blob[1:]))
        if blob[:1] == bytes([PLAIN]):
            return _inflate(blob[1:])
        if blob[:1] == bytes([DELTA]):
            return _undelta(_inflate(blob[1:]), b"".join(bases))
    except (zlib.error, IndexError) as exc:
        raise ValueError(f"stored bytes are damaged: {exc}") from exc
    raise ValueError("stored bytes are of an unknown form")


def is_delta(blob: bytes) -> bool:
    """Whether reading ``blob`` needs its bases."""
    return blob[:1] == bytes([DELTA])


__all__ = ["DELTA", "DICTIONARY", "NAMES", "PLAIN", "id_bytes", "id_letters", "is_delta", "pack",
           "unpack"]
