"""File safety of the private index directory (security-tests.md D17).

The directories below ``<git-dir>/hn/memory`` are owner-only (0700) and ours; the index and its
key are 0600 regular files with one link, owned by us; symlinks are refused; new files are
created exclusively under a temporary name and renamed into place.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from palimpsest.errors import Unavailable
from palimpsest.hn.index.schema import KEY_NAME, TEMP_PREFIX


def unsafe(message: str) -> Unavailable:
    return Unavailable(
        message,
        code="index-unsafe",
        hint="remove the path (it is a disposable cache) and run 'pal memory index rebuild'",
    )


def _private_dir(path: Path) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        os.mkdir(path, 0o700)
        info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise unsafe(f"{path} must be a real directory, not a symlink")
    if info.st_uid != os.geteuid():
        raise unsafe(f"{path} is owned by another user")
    if stat.S_IMODE(info.st_mode) & 0o022:
        raise unsafe(f"{path} is writable by other users")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)


def index_dir(git_dir: str | Path) -> Path:
    """``<git-dir>/hn/memory``, created owner-only; symlinked or foreign paths are refused."""
    raw = Path(str(git_dir).rstrip("/"))
    if raw.is_symlink():
        raise unsafe(f"{raw} is a symlink; refusing a symlinked git dir")
    base = raw / "hn"
    _private_dir(base)
    _private_dir(base / "memory")
    return base / "memory"


def check_private_file(path: Path) -> bool:
    """True when ``path`` exists and is safe; False when absent.

    Raises:
        Unavailable: ``index-unsafe`` for symlinks, other owners, extra links or loose modes.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode):
        raise unsafe(f"{path} is not a regular file")
    if info.st_uid != os.geteuid():
        raise unsafe(f"{path} is owned by another user")
    if info.st_nlink != 1:
        raise unsafe(f"{path} has other hard links")
    if stat.S_IMODE(info.st_mode) != 0o600:
        raise unsafe(f"{path} must have mode 0600")
    return True


def load_key(directory: Path) -> bytes:
    path = directory / KEY_NAME
    if check_private_file(path):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as handle:
            key = handle.read(65)
        if len(key) == 32:
            return key
        path.unlink()
    key = os.urandom(32)
    fd, tmp = temp_file(directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return key


def temp_file(directory: Path) -> tuple[int, str]:
    name = directory / f"{TEMP_PREFIX}{os.urandom(8).hex()}"
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    return fd, str(name)


def side_file_ok(path: Path) -> bool:
    """A WAL or shared-memory file beside the index must be a private regular file of ours."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return True
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_uid == os.geteuid()
        and info.st_nlink == 1
        and not stat.S_IMODE(info.st_mode) & 0o077
    )


__all__ = ["check_private_file", "index_dir", "load_key", "side_file_ok", "temp_file", "unsafe"]
