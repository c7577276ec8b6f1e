# ruff: noqa: E501 - seed tables read best one case per line
"""Fuzz target ``identity``: private-key documents and public-key texts (security-tests B4, B5).

Input: the bytes of a private-key document as ``pal id import FILE`` reads it, parsed by
:func:`palimpsest.identity.import_document`; the same bytes read as ASCII are also a public-key
text for :func:`decode_public_key` (as envelopes and keyrings carry keys).

Expected refusals: ``InvalidInput`` with code ``invalid-json``, ``invalid-identity``,
``invalid-name``, ``invalid-encoding``, ``invalid-key`` or ``weak-key``. Anything else is a
finding.

Oracle: an imported identity's public key is the one its seed derives, its actor the key's
SHA-256, its name a valid actor name; it exports to a document that imports to the same
identity and signs what its public key verifies. An accepted public key is the canonical
unpadded base64 of 32 bytes (re-encoding gives the same text), is not weak, loads in
``cryptography`` and does not verify the all-zero forgery (R = identity, S = 0).
"""

from __future__ import annotations

import base64
import hashlib

from tests.fuzz.harness import (
    ADVERSARIAL,
    Finding,
    Refused,
    Target,
    check,
    files,
    instrumented,
    refusals,
    texts,
)

with instrumented():
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    from palimpsest.errors import InvalidInput
    from palimpsest.identity import (
        b64_nopad,
        check_name,
        decode_public_key,
        export_document,
        import_document,
        weak_key_reason,
    )
    from tests.adversarial.fuzz.builder import identity_documents, public_keys_from_hex

REFUSALS = refusals(
    {InvalidInput: {"invalid-json", "invalid-identity", "invalid-name", "invalid-encoding",
                    "invalid-key", "weak-key"}}
)
_FORGERY = bytes([1]) + bytes(63)  # R = identity point, S = 0


def _check_identity(identity: object) -> None:
    seed, public = identity.seed, identity.public_key  # type: ignore[attr-defined]
    derived = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    check(derived == public, "public key is not derived from the seed")
    check(identity.actor == hashlib.sha256(public).hexdigest(), "actor is not the key's hash")  # type: ignore[attr-defined]
    check(weak_key_reason(public) is None, "an identity with a weak key was imported")
    check_name(identity.name)  # type: ignore[attr-defined]
    again = import_document(export_document(identity))  # type: ignore[arg-type]
    check(again == identity, "export/import is not a round trip")
    Ed25519PublicKey.from_public_bytes(public).verify(identity.sign(b"m"), b"m")  # type: ignore[attr-defined]


def _check_key(text: str, raw: bytes) -> None:
    check(b64_nopad(raw) == text and len(raw) == 32, "a non-canonical key text was accepted")
    check(weak_key_reason(raw) is None, "a weak key was accepted")
    key = Ed25519PublicKey.from_public_bytes(raw)
    try:
        key.verify(_FORGERY, b"any message")
    except InvalidSignature:
        return
    raise Finding("an accepted key verifies the small-order forgery")


def one_input(data: bytes) -> None:
    identity = REFUSALS.attempt(import_document, data)
    if not isinstance(identity, Refused):
        _check_identity(identity)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # non-ASCII text must be refused too
    raw = REFUSALS.attempt(decode_public_key, text)
    if not isinstance(raw, Refused):
        _check_key(text, raw)


def seeds() -> list[tuple[str, bytes]]:
    docs = identity_documents()
    alice = docs["alice"]
    key = alice.split(b'"publicKey":"')[1].split(b'"')[0]
    weak = public_keys_from_hex((ADVERSARIAL / "hn" / "weak-keys.txt").read_bytes())
    return [
        *files("fuzz/identity"),
        *((f"identity/doc/{k}", v) for k, v in docs.items()),
        *((f"identity/weak/{k}", v) for k, v in weak.items()),
        *texts("identity/literal", [
            key, key + b"=", key[:-1] + b"B", key.replace(b"A", b"-"), b" " + key,
            alice.replace(b'"version":0', b'"version":1'), alice.replace(b"Alice Agent", b"\\u0007"),
            alice.replace(b"Alice Agent", b"   "), alice.replace(b'"actor":"', b'"actor":"0'),
            alice.replace(b"Alice Agent", b"A" * 300), base64.b64encode(bytes(32)).rstrip(b"="),
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="identity",
    one_input=one_input,
    refusals=REFUSALS,
    seeds=seeds,
    classes=("B4", "B5", "A1", "E19"),
    runs=10_000,
    summary="private-key documents (pal id import) and public-key texts",
    dictionary=(b'"privateKey":"', b'"publicKey":"', b'"actor":"', b'"name":"', b'"version":0'),
)

if __name__ == "__main__":
    TARGET.fuzz()
