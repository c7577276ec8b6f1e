# ruff: noqa: E501 - seed tables read best one case per line
"""Fuzz target ``recall_cursor``: recall and grep continuation cursors (hn-memory-v0.md §16.8).

Input: the first byte picks how the rest is used —

- ``C`` (or anything but ``P``): the rest is a cursor string as a caller hands it back
  (``--cursor``, the ``cursor`` field of ``--input`` or an MCP argument), decoded as argv is
  (UTF-8 with ``surrogateescape``);
- ``P``: the rest is a cursor *payload*; the harness wraps it with a correct base64url encoding
  and checksum, so the fuzzer reaches the JSON and digest checks behind the checksum.

Both are checked with :func:`palimpsest.hn.recall.request.decode_cursor` for recall and for grep,
against the digests of one fixed request.

Expected refusals: ``InvalidInput`` with code ``invalid-cursor``. Anything else is a finding.

Oracle for an accepted cursor: its payload is at most 1,024 bytes and names the recomputed
digest; re-encoding its ``lastMemoryId`` gives a cursor that decodes to the same value; and the
domains stay apart — a cursor accepted for recall is refused for grep (and the other way round),
and for the digest of any other query.
"""

from __future__ import annotations

import base64
import hashlib

from tests.fuzz.harness import Refused, Target, check, files, instrumented, refusals, texts

with instrumented():
    from palimpsest.errors import InvalidInput
    from palimpsest.hn.recall.request import (
        GREP_CURSOR_TAG,
        RECALL_CURSOR_TAG,
        GrepSpec,
        decode_cursor,
        encode_cursor,
        normalize_request,
        query_digest,
    )

REFUSALS = refusals({InvalidInput: {"invalid-cursor"}})
_REQUEST = normalize_request(at_commit="a" * 40, query="memory")
_SOURCES, _POLICY = "sha256:" + "1" * 64, "sha256:" + "2" * 64
RECALL_DIGEST = query_digest(_REQUEST, _SOURCES, _POLICY)
GREP_DIGEST = query_digest(_REQUEST, _SOURCES, _POLICY, GrepSpec("mem.ry", ignore_case=False))
OTHER_DIGEST = query_digest(normalize_request(at_commit="a" * 40, query="other"), _SOURCES, _POLICY)
LAST = "sha256:" + "3" * 64


def wrap(payload: bytes, tag: bytes) -> str:
    """A cursor around ``payload`` with a correct encoding and checksum (as §16.8 builds it)."""
    text = base64.urlsafe_b64encode(payload).rstrip(b"=").decode("ascii")
    checksum = hashlib.sha256(tag + b"\x00" + payload).hexdigest()
    return f"{text}.{checksum}"


def _one(cursor: str, grep: bool) -> None:
    digest = GREP_DIGEST if grep else RECALL_DIGEST
    last = REFUSALS.attempt(decode_cursor, cursor, digest, grep=grep)
    if isinstance(last, Refused):
        return
    check(isinstance(last, str), "lastMemoryId is not a string")
    encoded = cursor.partition(".")[0]
    payload = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    check(len(payload) <= 1024, "a cursor payload over 1,024 bytes was accepted")
    again = encode_cursor(digest, last, grep=grep)
    check(decode_cursor(again, digest, grep=grep) == last, "a re-encoded cursor differs")
    crossed = REFUSALS.attempt(decode_cursor, cursor, RECALL_DIGEST if grep else GREP_DIGEST,
                               grep=not grep)  # fmt: skip
    check(isinstance(crossed, Refused), "a cursor crossed between recall and grep")
    other = REFUSALS.attempt(decode_cursor, cursor, OTHER_DIGEST, grep=grep)
    check(isinstance(other, Refused), "a cursor was accepted for another query")


def one_input(data: bytes) -> None:
    if data[:1] == b"P":
        for grep, tag in ((False, RECALL_CURSOR_TAG), (True, GREP_CURSOR_TAG)):
            _one(wrap(data[1:], tag), grep)
        return
    cursor = data[1:].decode("utf-8", "surrogateescape")
    _one(cursor, grep=False)
    _one(cursor, grep=True)


def _payload(digest: str, last: str = LAST, extra: str = "") -> bytes:
    return f'{{"version":0,"queryDigest":"{digest}","lastMemoryId":"{last}"{extra}}}'.encode()


def seeds() -> list[tuple[str, bytes]]:
    good = encode_cursor(RECALL_DIGEST, LAST)
    grep = encode_cursor(GREP_DIGEST, LAST, grep=True)
    return [
        *files("fuzz/recall_cursor"),
        *texts("recall_cursor/cursor", [b"C" + c.encode("utf-8", "surrogateescape") for c in (
            good, grep, good + "=", good.upper(), good.replace(".", ""), "." + good.split(".")[1],
            good[:-1], good + ".x", good.replace("-", "+"), good + "\n", "\udcff." + "0" * 64,
        )] + [b"C"]),
        *texts("recall_cursor/payload", [b"P" + p for p in (
            _payload(RECALL_DIGEST), _payload(GREP_DIGEST), _payload(RECALL_DIGEST, "x" * 900),
            _payload(RECALL_DIGEST, extra=',"more":1'), _payload(RECALL_DIGEST).replace(b"0,", b"true,"),
            b'{"version":0,"queryDigest":"%s","lastMemoryId":"a","lastMemoryId":"b"}' % RECALL_DIGEST.encode(),
            b'[1]', b'{"version":0,"queryDigest":"\\ud800","lastMemoryId":""}', b"\xef\xbb\xbf{}",
        )]),
    ]  # fmt: skip


TARGET = Target(
    name="recall_cursor",
    one_input=one_input,
    refusals=REFUSALS,
    seeds=seeds,
    classes=("A1", "A3", "C12"),
    runs=20_000,
    summary="recall/grep cursors: base64url payload, checksum, strict JSON, digest binding",
    dictionary=(RECALL_DIGEST.encode(), GREP_DIGEST.encode(), b'"lastMemoryId":"',
                b'"queryDigest":"', b'"version":0'),
)

if __name__ == "__main__":
    TARGET.fuzz()
