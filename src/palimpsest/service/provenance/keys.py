"""The server's signing identity in its data directory — the I/O shell of provenance.

``<data_dir>/provenance/`` (0700) holds ``server-key.json``, the active private key (the
repository-memory identity document of :mod:`palimpsest.identity`, mode 0600), and
``server-keys.json``, every public key that ever signed for this server: rotation makes a new
active key and keeps the old public keys (retired, with the moment they stopped signing), so
history signed before a rotation still verifies. The old private key is gone once rotated.

Another process (``pal admin key rotate`` beside a running ``pal serve``) may rotate: the
signer notices by the key file's identity (inode, size, mtime) and reloads; the published set
is written before the new private key, so no signature is ever made by a key not published.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from palimpsest import canonical
from palimpsest.errors import NotFound, Unavailable
from palimpsest.identity import (
    Identity,
    b64_nopad,
    export_document,
    import_document,
    new_identity,
    read_private,
    write_private,
)
from palimpsest.service.model import Changeset, Signature, Wire
from palimpsest.service.provenance import signing

DIRECTORY: Final = "provenance"
KEY_FILE: Final = "server-key.json"
PUBLISHED_FILE: Final = "server-keys.json"
SERVER_NAME: Final = "palimpsest-server"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _private_dir(path: Path) -> Path:
    """Create (0700) the provenance directory, refusing a symlink."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise Unavailable(f"{path} must be a real directory, not a symlink", code="unsafe-path",
                          hint="remove it; the server makes the directory itself")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


class ServerKeys:
    """The active signing key (made on first use) and the published key set."""

    def __init__(self, data_dir: Path) -> None:
        self._dir = Path(data_dir) / DIRECTORY
        self._lock = threading.Lock()
        self._path = str(self._dir / KEY_FILE)
        # (file stamp, identity, its OpenSSL key object, its public key text): signing on
        # every write, the key object is made once, not once per signature
        self._cached: tuple[tuple[int, int, int], Identity, Ed25519PrivateKey, str] | None = None

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self._path)
        except FileNotFoundError:
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns)

    def active(self) -> Identity:
        """The identity that signs now (made, with its published entry, on first use)."""
        return self._current()[1]

    def _current(self) -> tuple[tuple[int, int, int], Identity, Ed25519PrivateKey, str]:
        with self._lock:
            stamp = self._stamp()
            if self._cached is not None and self._cached[0] == stamp:
                return self._cached
            if stamp is None:
                with self._exclusive():
                    if self._stamp() is None:  # another process may have made it meanwhile
                        self._make(retire=None)
                stamp = self._stamp()
            identity = import_document(read_private(self._dir / KEY_FILE))
            if identity.public_key_text not in {k["public_key"] for k in self._entries()}:
                raise Unavailable("the server key is not in the published key set",
                                  code="memory_unavailable",
                                  hint="rotate it with `pal admin key rotate`")
            self._cached = ((stamp or (0, 0, 0)), identity,
                            Ed25519PrivateKey.from_private_bytes(identity.seed),
                            identity.public_key_text)
            return self._cached

    def sign(self, cs: Changeset, data: bytes) -> list[Signature]:
        """The server's signature over a changeset's canonical bytes (the store's signer)."""
        del cs  # the bytes are the changeset; the id is their digest
        _, _, key, public = self._current()
        return [Signature(signing.SERVER, signing.SERVER, public, b64_nopad(key.sign(data)))]

    def _entries(self) -> list[Wire]:
        path = self._dir / PUBLISHED_FILE
        try:
            data = read_private(path, 1 << 20)
        except NotFound:
            return []  # nothing published yet
        doc = canonical.decode(data, trailing_whitespace=True)
        signing.trusted_keys(doc)  # refuses a damaged set
        keys: list[Wire] = list(doc["keys"])
        return keys

    def published(self) -> Wire:
        """The published key set (every key that signed for this server)."""
        self.active()
        return signing.published_keys(self._entries())

    def rotate(self) -> Wire:
        """Make a new active key; the old public key stays published, retired."""
        with self._lock, self._exclusive():
            old = None
            if (self._dir / KEY_FILE).exists():
                old = import_document(read_private(self._dir / KEY_FILE)).public_key_text
            self._make(retire=old)
            self._cached = None
        return self.published()

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Between processes: one makes or rotates the key at a time."""
        _private_dir(self._dir)
        fd = os.open(self._dir / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _make(self, *, retire: str | None) -> None:
        fresh = new_identity(SERVER_NAME)
        now = _now()
        entries = []
        for e in self._entries():
            retired = {"status": "retired", "retired_at": now} if e["status"] == "active" else {}
            entries.append({**e, **retired})
        if retire is not None and retire not in {e["public_key"] for e in entries}:
            entries.append(signing.key_entry(retire, status="retired", created_at=now,
                                             retired_at=now))
        entries.append(signing.key_entry(fresh.public_key_text, status="active",
                                         created_at=now))
        doc = signing.published_keys(entries)
        write_private(self._dir / PUBLISHED_FILE, canonical.encode_indent(doc))
        write_private(self._dir / KEY_FILE, export_document(fresh))


__all__ = ["DIRECTORY", "KEY_FILE", "PUBLISHED_FILE", "ServerKeys"]
