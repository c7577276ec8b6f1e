"""``pal admin backup`` and ``restore``: a consistent copy of a live data directory, and its
return after every check a store can make.

A backup is a directory laid out as a data directory — the database, the uploaded files' bytes
under ``files/``, the server's signing keys under ``provenance/`` and the merge key — plus
``backup.json``, the manifest naming the digest of every part. It is taken while the server
runs:

1. the database is copied through SQLite's online backup API in one read transaction
   (:func:`~palimpsest.service.storage.backup.copy_database`): the copy holds every
   changeset committed before it began and nothing of any that had not;
2. the file bytes that copy names are copied and re-hashed. Bytes are written before the row
   naming them commits, so every named file is on disk — unless an erase committed after the
   snapshot, in which case the snapshot is taken again (an erased file never comes back);
3. the key files come last: the published key set only grows, so it holds every key that
   signed a changeset of the snapshot.

Everything is written into a hidden sibling of the destination and renamed into place at the
end, so a failed backup or restore leaves nothing behind. A restore verifies the manifest's
digests, SQLite's ``integrity_check``, the schema, every named file's bytes, and then re-derives
every projection from the history (``rebuild``) and refuses unless it equals what was stored.

A backup holds what was erased after it was taken: erase is final for the live store only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from palimpsest import __version__, canonical
from palimpsest.errors import Conflict, InvalidInput, Unavailable
from palimpsest.service.model import Wire
from palimpsest.service.storage import (
    SCHEMA_VERSION,
    check_database,
    copy_database,
    named_files,
    private_dir,
)

DATABASE: Final = "palimpsest.db"
MANIFEST: Final = "backup.json"
FORMAT: Final = "palimpsest-backup/1"
# Small files beside the database that a restored server needs: its signing identity (the
# published set first: see the module docs) and the merge key, when the server made one.
KEY_FILES: Final = ("provenance/server-keys.json", "provenance/server-key.json",
                    "merge-hmac.key")
ATTEMPTS: Final = 5
CHUNK: Final = 1 << 20


def backup(data_dir: Path, dest: Path) -> Wire:
    """Copy the store in ``data_dir`` (served or not) to the new directory ``dest``.

    Raises:
        Conflict: ``dest`` exists and is not an empty directory.
        Unavailable: the store cannot be read, or its file bytes do not match their names.
    """
    _refuse_occupied(dest, "backup")
    with _staged(dest) as work:
        private_dir(work / "files")
        files: dict[str, int] = {}
        for _ in range(ATTEMPTS):
            (work / DATABASE).unlink(missing_ok=True)
            copy_database(data_dir / DATABASE, work / DATABASE)
            wanted = named_files(work / DATABASE)
            missing = [sha for sha in wanted
                       if sha not in files and not _copy_file(data_dir, work, sha, files)]
            if not missing:
                break
        else:
            raise Unavailable("uploaded files kept disappearing while the backup ran",
                              code="backup-unstable",
                              hint="erases were running; run pal admin backup again")
        for extra in [sha for sha in files if sha not in set(wanted)]:
            files.pop(extra)  # copied for an earlier snapshot whose rows were erased since
            _file_path(work, extra).unlink()
        keys = {}
        for name in KEY_FILES:
            if (data_dir / name).is_file():
                private_dir((work / name).parent)
                keys[name] = _copy_bytes(data_dir / name, work / name)[1]
        manifest: Wire = {
            "format": FORMAT, "version": __version__, "schema": SCHEMA_VERSION,
            "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "source": str(data_dir.resolve()),
            "database": {"sha256": _sha256(work / DATABASE),
                         "bytes": (work / DATABASE).stat().st_size},
            "files": {"count": len(files), "bytes": sum(files.values())},
            "keys": keys,
        }
        _write_private(work / MANIFEST, canonical.encode_indent(manifest))
    return {"object": "backup", "path": str(dest), **manifest}


def restore(source: Path, data_dir: Path,
            open_and_rebuild: Callable[[Path], Wire]) -> Wire:
    """Check the backup ``source`` and make it the store of the new directory ``data_dir``.

    ``open_and_rebuild`` opens a data directory as a service and returns its ``rebuild``
    report (the facade is above this module); the restore is refused unless it says equal.

    Raises:
        InvalidInput: ``source`` is not a backup, or fails a check (named in the message).
        Conflict: ``data_dir`` exists and is not an empty directory.
    """
    manifest = _manifest(source)
    _refuse_occupied(data_dir, "restore")
    db = source / DATABASE
    _expect(db.is_file() and _sha256(db) == manifest["database"]["sha256"],
            f"{db} does not match the digest its manifest records")
    integrity, schema = check_database(db)
    _expect(integrity == "ok", f"{db} fails SQLite's integrity check: {integrity}")
    if schema != str(SCHEMA_VERSION):
        raise InvalidInput(f"the backup holds store schema {schema}; this version restores "
                           f"schema {SCHEMA_VERSION}", code="backup-schema",
                           hint="restore it with the version that made it "
                           f"({manifest.get('version')}), then run pal admin migrate")
    wanted = named_files(db)
    for sha in wanted:
        path = _file_path(source, sha)
        _expect(path.is_file() and _sha256(path) == sha,
                f"the bytes of file {sha} are missing from the backup or damaged")
    for name, digest in manifest.get("keys", {}).items():
        _expect(name in KEY_FILES and (source / name).is_file()
                and _sha256(source / name) == digest,
                f"{source / name} does not match the digest its manifest records")
    with _staged(data_dir) as work:
        private_dir(work / "files")
        copied: dict[str, int] = {}
        for sha in wanted:
            _copy_file(source, work, sha, copied)
        for name in manifest.get("keys", {}):
            private_dir((work / name).parent)
            _copy_bytes(source / name, work / name)
        _copy_bytes(db, work / DATABASE)
        report = open_and_rebuild(work)
        if report.get("equal") is not True:
            raise InvalidInput("the records re-derived from the backup's history differ from "
                               "the ones it stores; nothing was restored",
                               code="backup-mismatch",
                               hint="the backup was changed after it was taken: use another")
    return {"object": "restore", "path": str(data_dir), "backup": str(source),
            "backup_created_at": manifest.get("created_at"),
            "files": {"count": len(copied), "bytes": sum(copied.values())},
            "rebuild": report}


# --- helpers ---------------------------------------------------------------------------------


def _manifest(source: Path) -> Wire:
    try:
        doc = canonical.decode((source / MANIFEST).read_bytes().rstrip(b"\n"))
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{source} is not a backup made by pal admin backup ({exc})",
                           code="not-a-backup",
                           hint="pass the directory pal admin backup wrote") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidInput(f"{source / MANIFEST} is not a {FORMAT} manifest",
                           code="not-a-backup", hint="pass the directory pal admin backup wrote")
    return doc


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidInput(message + "; nothing was restored", code="backup-damaged",
                           hint="restore from another backup")


def _refuse_occupied(path: Path, what: str) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise Conflict(f"{path} already exists and is not empty", code=f"{what}-target-exists",
                       hint=f"name a new directory for the {what} (a running store is never "
                       "overwritten: stop the server and move its directory aside first)")


@contextmanager
def _staged(dest: Path) -> Iterator[Path]:
    """A hidden sibling of ``dest`` to fill, renamed to ``dest`` on success, gone on failure."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    private_dir(work)
    try:
        yield work
        _fsync_tree(work)
        with contextlib.suppress(FileNotFoundError):
            dest.rmdir()  # an empty directory made for it
        os.replace(work, dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _file_path(root: Path, sha: str) -> Path:
    return root / "files" / sha[:2] / sha


def _copy_file(source_root: Path, work: Path, sha: str, copied: dict[str, int]) -> bool:
    """Copy one file's bytes, checking their digest; False when they are gone."""
    try:
        size, _ = _copy_bytes(_file_path(source_root, sha), _file_path(work, sha), expect=sha)
    except FileNotFoundError:
        return False
    copied[sha] = size
    return True


def _copy_bytes(src: Path, dst: Path, *, expect: str | None = None) -> tuple[int, str]:
    """Copy ``src`` to ``dst`` (0600); its size and sha256. With ``expect``, the bytes must
    hash to it."""
    private_dir(dst.parent)
    digest, size = hashlib.sha256(), 0
    with src.open("rb") as fin:
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fout:
            while chunk := fin.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
                fout.write(chunk)
    if expect is not None and digest.hexdigest() != expect:
        dst.unlink()
        raise Unavailable(f"the bytes of file {expect} in {src.parent.parent.parent} do not "
                          "match their digest", code="file-damaged",
                          hint="the store's files were changed outside the service; "
                          "restore them from an older backup")
    return size, digest.hexdigest()


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fin:
        while chunk := fin.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync_tree(root: Path) -> None:
    """Make the copy durable before it is renamed into place."""
    for folder, _, names in os.walk(root):
        for name in names:
            fd = os.open(Path(folder) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


__all__ = ["backup", "restore"]
