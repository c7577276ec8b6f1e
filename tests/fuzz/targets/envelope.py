"""Fuzz target ``envelope``: ``hn-memory/0`` envelopes, their validation and signatures.

Input: the raw bytes of a ``memory.json`` blob, as a remote or a local stream holds it, handed
to :func:`palimpsest.hn.envelope.decode_envelope`; an accepted envelope is then signed or
forged and checked with :func:`verify_signature`.

Expected refusals: ``InvalidInput`` with code ``invalid-json``, ``invalid-memory``,
``non-canonical``, ``unsupported-protocol`` or ``weak-key`` from ``decode_envelope``;
``invalid-signature`` from ``verify_signature``. Anything else is a finding.

Oracle for an accepted envelope (hn-memory-v0.md §2-§11, security-tests A1-A3, B4, B5, B7):

- the fast reader path agrees with the strict canonical decoder (``decode_canonical``) on the
  same bytes, and ``encode_envelope`` reproduces them exactly;
- rules re-checked independently of the validator: every identifier, hash and timestamp is ASCII
  and has its exact shape, the timestamp is a real calendar instant, ``actor`` is the SHA-256
  of the decoded ``publicKey``, ``sequence`` is 1 … 2⁶⁴−1 with ``previous`` present exactly
  when it is above 1, content is 1-65,536 bytes, the payload at most 512 KiB;
- a signature by the envelope's key verifies, a one-bit change of it does not, and a signature
  by another key never does.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import re

from tests.fuzz.harness import (
    VECTORS,
    Finding,
    Refused,
    Target,
    check,
    files,
    instrumented,
    refusals,
)

with instrumented():
    from palimpsest.canonical import decode_canonical
    from palimpsest.errors import InvalidInput
    from palimpsest.hn.envelope import (
        MAX_CONTENT_BYTES,
        MAX_PAYLOAD_BYTES,
        Envelope,
        decode_envelope,
        encode_envelope,
        envelope_wire,
        memory_id,
        verify_signature,
    )
    from tests.adversarial.fuzz.builder import ALICE, BOB, envelopes, signature

DECODE_REFUSALS = refusals(
    {InvalidInput: {"invalid-json", "invalid-memory", "non-canonical", "unsupported-protocol",
                    "weak-key"}}
)
SIGNATURE_REFUSALS = refusals({InvalidInput: {"invalid-signature"}})
STRICT = refusals({InvalidInput: {"invalid-json", "non-canonical"}})

_ASCII = re.ASCII
_TS = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]{1,9})?"
    r"(?:Z|[+-]([0-9]{2}):([0-9]{2}))",
    _ASCII,
)
_HEX = re.compile(r"[0-9a-f]{64}", _ASCII)
_ID = re.compile(r"sha256:[0-9a-f]{64}", _ASCII)
_OID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?", _ASCII)
_KEYS = {ALICE.actor: ALICE, BOB.actor: BOB}


def _check_rules(data: bytes, env: Envelope) -> None:
    check(len(data) <= MAX_PAYLOAD_BYTES, "an envelope over 512 KiB was accepted")
    check(env.protocol == "hn-memory/0", "an envelope of another protocol was accepted")
    check(_HEX.fullmatch(env.actor), "a malformed actor was accepted")
    check(_ID.fullmatch(env.stream), "a malformed stream was accepted")
    raw_key = base64.b64decode(env.public_key + "=", validate=True)
    check(hashlib.sha256(raw_key).hexdigest() == env.actor, "actor is not the key's fingerprint")
    check(1 <= env.sequence <= 2**64 - 1, "a sequence out of range was accepted")
    check((env.sequence == 1) == (env.previous == ""), "previous does not follow the sequence")
    check(not env.previous or _ID.fullmatch(env.previous), "a malformed previous was accepted")
    check(not env.target or _ID.fullmatch(env.target), "a malformed target was accepted")
    match = _TS.fullmatch(env.timestamp)
    check(match, f"a malformed timestamp was accepted: {env.timestamp!r}")
    assert match is not None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    try:  # Go (and RFC 3339) allow year 0000, a leap year like 400; datetime starts at 1
        datetime.datetime(year or 400, month, day, hour, minute, second)
    except ValueError as exc:
        raise Finding(f"an impossible timestamp was accepted: {env.timestamp!r}") from exc
    for item in env.evidence:
        check(item.isascii(), "non-ASCII evidence was accepted")
    record = env.record
    if record is not None:
        size = len(record.content.encode("utf-8"))
        check(0 < size <= MAX_CONTENT_BYTES, "content size out of bounds was accepted")
        check(_OID.fullmatch(record.anchor.commit), "a malformed anchor commit was accepted")
        for anchor_path in record.anchor.paths:
            check(anchor_path.blob == "absent" or _OID.fullmatch(anchor_path.blob),
                  "a malformed path blob was accepted")  # fmt: skip
            check(".." not in anchor_path.path.split("/"), "a path with .. was accepted")
        for item in (*record.evidence, record.attempt_outcome, record.anchor.subject):
            check(item.isascii(), "a non-ASCII identifier was accepted")


def one_input(data: bytes) -> None:
    env = DECODE_REFUSALS.attempt(decode_envelope, data)
    strict = STRICT.attempt(decode_canonical, data)
    if isinstance(env, Refused):
        if env.code == "invalid-json":
            check(isinstance(strict, Refused), "decode_envelope: invalid-json for valid JSON")
        return
    check(not isinstance(strict, Refused), "an envelope the strict canonical decoder refuses "
          "was accepted by the fast reader path")  # fmt: skip
    check(strict == envelope_wire(env), "the envelope differs from the strictly decoded JSON")
    check(encode_envelope(env) == data, "encode_envelope does not reproduce the accepted bytes")
    check(memory_id(data) == "sha256:" + hashlib.sha256(data).hexdigest(), "memory ID")
    _check_rules(data, env)
    signer = _KEYS.get(env.actor)
    if signer is not None and signer.public_key_text == env.public_key:
        good = signature(data, signer).decode()
        verified = SIGNATURE_REFUSALS.attempt(verify_signature, env, data, good)
        check(not isinstance(verified, Refused), "a valid signature was refused")  # fmt: skip
        flipped = good[:10] + ("B" if good[10] == "A" else "A") + good[11:]
        forged = SIGNATURE_REFUSALS.attempt(verify_signature, env, data, flipped)
        check(isinstance(forged, Refused), "a changed signature verified")
    other = BOB if env.actor == ALICE.actor else ALICE
    theirs = signature(data, other).decode()
    stolen = SIGNATURE_REFUSALS.attempt(verify_signature, env, data, theirs)
    check(isinstance(stolen, Refused), "another key's signature verified")


def _interop_payloads() -> list[tuple[str, bytes]]:
    from palimpsest.canonical import decode

    memories = decode((VECTORS / "hn-memory-v0" / "memories.json").read_bytes(),
                      trailing_whitespace=True)  # fmt: skip
    return [(f"vectors/{m['Label']}", m["MemoryJSON"].encode()) for m in memories]


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("hn/envelopes", "fuzz/envelope"),
        *_interop_payloads(),
        *((f"built/{name}", data) for name, data in envelopes().items()),
    ]


# Look-alike digits (Arabic-Indic, Devanagari, full-width), escapes Go writes or refuses, and the
# envelope's own keys and values, for libFuzzer to splice in.
DICTIONARY = (
    "\u0662".encode(), "\u0966".encode(), "\uff12".encode(), "\u00b2".encode(),
    b'\\u003c', b'\\u2028', b'\\u00e9', b'\\/', b'\\ud800', "\u2028".encode(),
    b'"previous":"sha256:', b'"target":"sha256:', b'"reason":"', b'"evidence":[', b'"handoff":{',
    b'"completed":[],"assumptions":[],"blockers":[],"nextActions":[]', b'"attemptOutcome":"',
    b'"paths":[{"path":"', b'"blob":"absent"', b'"subject":"issue:sha256:', b'"mode":"subject"',
    b'"operation":"supersede"', b'"operation":"retract"', b'"operation":"challenge"',
    b'"kind":"handoff"', b'"kind":"attempt"', b'"kind":"verification"', b"memory:sha256:",
    b"event:sha256:", b"git:", b"18446744073709551615", b"18446744073709551616", b"+00:00",
    b".000000001", b"-23:59",
)

TARGET = Target(
    name="envelope",
    one_input=one_input,
    refusals=DECODE_REFUSALS,
    seeds=seeds,
    classes=("A1", "A2", "A3", "B4", "B5", "B7", "C10", "C12"),
    runs=20_000,
    max_len=8192,
    summary="hn-memory/0 memory.json: decode, validate, canonical bytes, signatures",
    dictionary=DICTIONARY,
)

if __name__ == "__main__":
    TARGET.fuzz()
