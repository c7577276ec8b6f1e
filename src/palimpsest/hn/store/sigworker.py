"""Ed25519 verification worker for the repo-memory reader.

Run as ``python -m palimpsest.hn.store.sigworker``, a child process started by
:mod:`palimpsest.hn.store.sigpool`.  It reads batches on stdin and answers each with one verdict
byte per item (1 = the signature verifies) on stdout, in order, until
stdin closes.  It does nothing else: every other check (tree, blobs, strict decoding, key
encoding and weak keys, continuity) stays in the reader, and the reader re-checks any ``0`` in
its own process before it reports a failure.

Frame: ``<II`` (item count, body bytes), then per item ``<32s64sI`` (raw public key, raw
signature, payload length) followed by the payload bytes.

It imports only the standard library and ``cryptography`` so that it starts quickly.
"""

from __future__ import annotations

import struct
import sys
from typing import BinaryIO

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

HEADER = struct.Struct("<II")
ITEM = struct.Struct("<32s64sI")
_MAX_KEYS = 4096


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    """``size`` bytes, or None at a clean end of input before the first byte."""
    chunks: list[bytes] = []
    left = size
    while left:
        chunk = stream.read(left)
        if not chunk:
            if left == size:
                return None
            raise EOFError("input ended inside a frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def verdicts(body: bytes, count: int, keys: dict[bytes, Ed25519PublicKey]) -> bytes:
    """Verify the ``count`` items of one frame body; one byte per item."""
    out = bytearray(count)
    view = memoryview(body)
    pos = 0
    for index in range(count):
        raw_key, raw_sig, length = ITEM.unpack_from(body, pos)
        pos += ITEM.size
        payload = view[pos : pos + length]
        pos += length
        key = keys.get(raw_key)
        if key is None:
            if len(keys) >= _MAX_KEYS:
                keys.clear()
            key = keys[raw_key] = Ed25519PublicKey.from_public_bytes(raw_key)
        try:
            key.verify(raw_sig, payload)
        except InvalidSignature:
            continue
        out[index] = 1
    return bytes(out)


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Answer frames until stdin closes."""
    keys: dict[bytes, Ed25519PublicKey] = {}
    while True:
        header = _read_exact(stdin, HEADER.size)
        if header is None:
            return
        count, size = HEADER.unpack(header)
        body = _read_exact(stdin, size) if size else b""
        if body is None:
            raise EOFError("input ended inside a frame")
        stdout.write(verdicts(body, count, keys))
        stdout.flush()


if __name__ == "__main__":  # pragma: no cover - run as a child process by sigpool
    serve(sys.stdin.buffer, sys.stdout.buffer)
