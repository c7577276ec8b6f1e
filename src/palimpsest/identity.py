"""Ed25519 identities: key encoding, fingerprints, weak-key rejection and the private keyring.

An actor is an Ed25519 key; its ID is the lower-case hex SHA-256 of the raw 32-byte public key
(hn-memory-v0.md §7).  Keys travel as unpadded standard base64 and every decoder here insists on
the canonical form (no padding, no stray characters, no non-zero trailing bits).

Weak keys (security-tests.md §1.1, B5): with the OpenSSL backend a public key that encodes a
small-order point verifies the forged signature (R = identity, S = 0) for any message.  So
:func:`check_public_key` refuses non-canonical encodings, points off the curve and every point of
order dividing 8, on import and on verification alike.

Private keys live only below ``<git-dir>/hn/`` (directories 0700, files 0600, atomic replace,
symlinks refused) and never enter a commit.  The file layout is this project's choice: one
strict JSON document per identity in ``hn/identities/<actor>.json`` and the active actor's ID in
``hn/active-identity``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from palimpsest.canonical import decode, encode
from palimpsest.errors import InvalidInput, NotFound, Unavailable
from palimpsest.text import has_control, is_blank

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

# cryptography is imported where a key signs or verifies: commands that do neither (a warm
# recall) start without it.

_HEX64 = re.compile(r"[0-9a-f]{64}")

# Curve25519 in twisted Edwards form (RFC 8032 §5.1).
_P = 2**255 - 19
_D = (-121665 * pow(121666, _P - 2, _P)) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def b64_nopad(data: bytes) -> str:
    """Unpadded standard base64, the encoding of keys and signatures."""
    return base64.b64encode(data).decode("ascii").rstrip("=")


def b64_nopad_decode(text: str, length: int, what: str) -> bytes:
    """Decode canonical unpadded base64 of exactly ``length`` bytes.

    Canonical means: standard alphabet, no padding, no whitespace or stray characters, and no
    non-zero trailing bits — the re-encoding must reproduce ``text`` exactly.

    Raises:
        InvalidInput: code ``invalid-encoding`` when the text is not the canonical encoding.
    """
    expected_chars = (length * 4 + 2) // 3
    if len(text) != expected_chars or not text.isascii():
        raise InvalidInput(f"invalid {what} encoding", code="invalid-encoding")
    try:
        raw = binascii.a2b_base64(text + "=" * (-len(text) % 4), strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInput(f"invalid {what} encoding", code="invalid-encoding") from exc
    if len(raw) != length or binascii.b2a_base64(raw, newline=False).rstrip(b"=") != text.encode():
        raise InvalidInput(f"invalid {what} encoding", code="invalid-encoding")
    return raw


def fingerprint(public_key: bytes) -> str:
    """The actor ID: lower-case hex SHA-256 of the raw 32-byte public key."""
    return hashlib.sha256(public_key).hexdigest()


def _edwards_add(
    p: tuple[int, int, int, int], q: tuple[int, int, int, int]
) -> tuple[int, int, int, int]:
    # Extended coordinates, RFC 8032 §5.1.4.
    x1, y1, z1, t1 = p
    x2, y2, z2, t2 = q
    a = (y1 - x1) * (y2 - x2) % _P
    b = (y1 + x1) * (y2 + x2) % _P
    c = t1 * 2 * _D * t2 % _P
    d = z1 * 2 * z2 % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _decompress(raw: bytes) -> tuple[int, int, int, int] | None:
    """RFC 8032 §5.1.3 decoding, refusing non-canonical y and the (x = 0, sign = 1) form."""
    y = int.from_bytes(raw, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    if y >= _P:
        return None
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    x = u * pow(v, 3, _P) * pow(u * pow(v, 7, _P), (_P - 5) // 8, _P) % _P
    vx2 = v * x * x % _P
    if vx2 == u:
        pass
    elif vx2 == (-u) % _P:
        x = x * _SQRT_M1 % _P
    else:
        return None
    if x == 0 and sign:
        return None
    if x & 1 != sign:
        x = _P - x
    return (x, y, 1, x * y % _P)


@lru_cache(maxsize=4096)
def weak_key_reason(raw: bytes) -> str | None:
    """Why ``raw`` is not an acceptable Ed25519 public key, or ``None`` when it is."""
    if len(raw) != 32:
        return "public key must be 32 bytes"
    point = _decompress(raw)
    if point is None:
        return "public key is not a canonical curve point"
    for _ in range(3):  # [8]P
        point = _edwards_add(point, point)
    x, y, z, _t = point
    if x % _P == 0 and (y - z) % _P == 0:
        return "public key is a small-order point"
    return None


def check_public_key(raw: bytes) -> None:
    """Refuse weak Ed25519 public keys (small order, non-canonical, off the curve).

    Raises:
        InvalidInput: code ``weak-key``.
    """
    reason = weak_key_reason(raw)
    if reason is not None:
        raise InvalidInput(reason, code="weak-key", hint="use a key made by `pal id init`")


def decode_public_key(text: str) -> bytes:
    """Decode and check a public key given as canonical unpadded base64."""
    raw = b64_nopad_decode(text, 32, "public key")
    check_public_key(raw)
    return raw


@lru_cache(maxsize=4096)
def verifier(raw: bytes) -> Ed25519PublicKey:
    """A cached verifier object for a checked public key (keys repeat along a stream)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (  # noqa: PLC0415
        Ed25519PublicKey,
    )

    check_public_key(raw)
    return Ed25519PublicKey.from_public_bytes(raw)


@dataclass(frozen=True, slots=True)
class Identity:
    """A signing identity: display name and the 32-byte Ed25519 seed (RFC 8032 private key)."""

    name: str
    seed: bytes
    public_key: bytes

    @property
    def actor(self) -> str:
        """The actor ID (public-key fingerprint)."""
        return fingerprint(self.public_key)

    @property
    def public_key_text(self) -> str:
        """The public key as unpadded base64."""
        return b64_nopad(self.public_key)

    def sign(self, payload: bytes) -> bytes:
        """Pure Ed25519 signature over the exact payload bytes (deterministic)."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import (  # noqa: PLC0415
            Ed25519PrivateKey,
        )

        return Ed25519PrivateKey.from_private_bytes(self.seed).sign(payload)

    def __repr__(self) -> str:  # never print the seed
        return f"Identity(name={self.name!r}, actor={self.actor})"


def identity_from_seed(name: str, seed: bytes) -> Identity:
    """Build an identity from a 32-byte seed, refusing seeds whose public key is weak."""
    if len(seed) != 32:
        raise InvalidInput("private key seed must be 32 bytes", code="invalid-key")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (  # noqa: PLC0415
        Ed25519PrivateKey,
    )

    public = Ed25519PrivateKey.from_private_bytes(seed).public_key()
    raw = public.public_bytes_raw()
    check_public_key(raw)
    return Identity(name=name, seed=seed, public_key=raw)


def new_identity(name: str) -> Identity:
    """A fresh identity with a random seed."""
    return identity_from_seed(name, os.urandom(32))


def check_name(name: str) -> str:
    """Validate a display name as ``actorName`` (hn-memory-v0.md §3) usable in a Git ident."""
    if is_blank(name):
        raise InvalidInput("identity name must not be blank", code="invalid-name")
    if len(name.encode("utf-8")) > 256:
        raise InvalidInput("identity name exceeds 256 bytes", code="invalid-name")
    if has_control(name):
        raise InvalidInput("identity name must not hold control characters", code="invalid-name")
    return name


# ---------------------------------------------------------------- keyring (I/O shell)

_KEYRING_VERSION = 0


def export_document(identity: Identity) -> bytes:
    """The portable private-key document (compact canonical JSON plus LF). Handle as a secret."""
    doc = {
        "version": _KEYRING_VERSION,
        "name": identity.name,
        "actor": identity.actor,
        "publicKey": identity.public_key_text,
        "privateKey": b64_nopad(identity.seed + identity.public_key),
    }
    return encode(doc) + b"\n"


def import_document(data: bytes) -> Identity:
    """Parse a private-key document strictly and check every consistency rule.

    Raises:
        InvalidInput: malformed document, mismatched keys or a weak public key.
    """
    doc = decode(data, max_bytes=4096, trailing_whitespace=True)
    keys = ["version", "name", "actor", "publicKey", "privateKey"]
    if not isinstance(doc, dict) or sorted(doc) != sorted(keys):
        raise InvalidInput(
            "identity document must hold exactly: " + ", ".join(keys), code="invalid-identity"
        )
    if doc["version"] != _KEYRING_VERSION or isinstance(doc["version"], bool):
        raise InvalidInput("unsupported identity document version", code="invalid-identity")
    for key in keys[1:]:
        if not isinstance(doc[key], str):
            raise InvalidInput(f"identity field {key} must be a string", code="invalid-identity")
    name = check_name(doc["name"])
    public = decode_public_key(doc["publicKey"])
    private = b64_nopad_decode(doc["privateKey"], 64, "private key")
    identity = identity_from_seed(name, private[:32])
    if private[32:] != public or identity.public_key != public:
        raise InvalidInput("private key does not match the public key", code="invalid-identity")
    if doc["actor"] != identity.actor:
        raise InvalidInput("actor is not the public-key fingerprint", code="invalid-identity")
    return identity


def _private_dir(git_dir: Path, *parts: str) -> Path:
    """Create (0700) and return a directory below ``<git-dir>/hn``, refusing symlinks."""
    current = git_dir
    for part in ("hn", *parts):
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            os.mkdir(current, 0o700)
            info = os.lstat(current)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise Unavailable(
                f"{current} must be a real directory, not a symlink", code="unsafe-path"
            )
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(current, 0o700)
    return current


def private_dir(git_dir: Path, *parts: str) -> Path:
    """``<git-dir>/hn[/parts…]``, created owner-only (0700), symlinks refused: where private
    repository state lives (identities, the MCP install journal)."""
    return _private_dir(git_dir, *parts)


def write_private(path: Path, data: bytes) -> None:
    """Atomically replace ``path`` with ``data`` at mode 0600 (temporary file, fsync, rename)."""
    if path.is_symlink():
        raise Unavailable(f"{path} is a symlink; refusing to write", code="unsafe-path")
    fd, tmp = tempfile.mkstemp(prefix=".hn-private-", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_private(path: Path, max_bytes: int = 65536) -> bytes:
    """Read a private file, refusing symlinks and files readable by others."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError as exc:
        raise NotFound(f"{path.name} does not exist", code="no-identity") from exc
    except OSError as exc:
        raise Unavailable(f"cannot read {path}: refusing symlinks", code="unsafe-path") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) & 0o077:
            raise Unavailable(f"{path} must be a regular file of mode 0600", code="unsafe-path")
        return handle.read(max_bytes + 1)[: max_bytes + 1]


def save_identity(git_dir: Path, identity: Identity, *, activate: bool = True) -> Path:
    """Store an identity's private key below ``<git-dir>/hn/identities`` (0600)."""
    directory = _private_dir(git_dir, "identities")
    path = directory / f"{identity.actor}.json"
    write_private(path, export_document(identity))
    if activate:
        write_private(_private_dir(git_dir) / "active-identity", identity.actor.encode() + b"\n")
    return path


def load_identity(git_dir: Path, actor: str | None = None) -> Identity:
    """Load the active identity (or the named actor's).

    Raises:
        NotFound: no identity; the message says to run ``pal id init``.
    """
    hn_dir = git_dir / "hn"
    if actor is None:
        try:
            actor = read_private(hn_dir / "active-identity", 128).decode("ascii").strip()
        except NotFound as exc:
            raise NotFound(
                "no active identity in this repository",
                code="no-identity",
                hint="run `pal id init --name NAME` or `pal id import FILE`",
            ) from exc
        except UnicodeDecodeError as exc:
            raise InvalidInput("active identity file is corrupt", code="invalid-identity") from exc
    if not _HEX64.fullmatch(actor):
        raise InvalidInput("actor must be 64 lower-case hex characters", code="invalid-actor")
    try:
        data = read_private(hn_dir / "identities" / f"{actor}.json")
    except NotFound as exc:
        raise NotFound(
            f"no private key for actor {actor} in this repository",
            code="no-identity",
            hint="import it with `pal id import FILE`",
        ) from exc
    identity = import_document(data)
    if identity.actor != actor:
        raise InvalidInput("keyring file does not match its actor", code="invalid-identity")
    return identity


__all__ = [
    "Identity",
    "b64_nopad",
    "b64_nopad_decode",
    "check_name",
    "check_public_key",
    "decode_public_key",
    "export_document",
    "fingerprint",
    "identity_from_seed",
    "import_document",
    "load_identity",
    "new_identity",
    "private_dir",
    "read_private",
    "save_identity",
    "verifier",
    "weak_key_reason",
    "write_private",
]
