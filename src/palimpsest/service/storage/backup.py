"""The SQL of backups: a consistent copy of a live database, and the checks a restore makes.

``copy_database`` uses SQLite's online backup API in a single step, so the whole copy is read
inside one read transaction: under WAL the writers of a running server go on committing, and
the copy holds exactly the transactions committed before it began — never half a changeset.
The copy is a self-contained file (rollback journal, not WAL) that the store opens as it is.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from palimpsest.errors import Unavailable
from palimpsest.service.model import MEMORY_UNAVAILABLE
from palimpsest.service.storage.files import private_file


def copy_database(source: Path, dest: Path) -> None:
    """Copy the database ``source`` to the new file ``dest`` (mode 0600), consistently while
    other connections write.

    Raises:
        Unavailable: the source cannot be read (SQLite's own message is kept).
    """
    private_file(dest)
    try:
        with contextlib.closing(sqlite3.connect(source, timeout=30)) as src, \
                contextlib.closing(sqlite3.connect(dest)) as dst:
            src.backup(dst)  # pages=-1: one step, one read transaction, one snapshot
            dst.execute("PRAGMA journal_mode=DELETE")
    except sqlite3.Error as exc:
        raise Unavailable(f"cannot copy the database {source}: {exc}", code=MEMORY_UNAVAILABLE,
                          hint="check that the data directory is readable by this user "
                          "and its disk is not full") from exc


def named_files(database: Path) -> list[str]:
    """The sha256 of every uploaded file's bytes the database names."""
    with contextlib.closing(_open_read_only(database)) as db:
        return [r[0] for r in db.execute("SELECT DISTINCT sha256 FROM files ORDER BY sha256")]


def check_database(database: Path) -> tuple[str, str | None]:
    """``(integrity, schema)``: SQLite's ``integrity_check`` answer (``"ok"`` when sound) and
    the store schema the database records (``None`` when it records none)."""
    try:
        with contextlib.closing(_open_read_only(database)) as db:
            problems = [r[0] for r in db.execute("PRAGMA integrity_check(20)")]
            tables = {r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
            row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone() \
                if "meta" in tables else None
    except sqlite3.DatabaseError as exc:
        return str(exc), None
    return "; ".join(problems), (str(row[0]) if row is not None else None)


def _open_read_only(database: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True, timeout=30)


__all__ = ["check_database", "copy_database", "named_files"]
