"""``pal admin migrate --to postgresql://…``: move a data directory's embedded store into an
empty PostgreSQL database, proving the result equal.

The history and what people said (members, credentials, keys, sessions, the tree, grants,
files, documents, refs, bodies, changesets with their signatures, Memory Git's review rows,
stored responses) are copied; every projection and the search index are derived again from
the changesets on the target, as ``pal admin rebuild`` derives them; then the projection rows
of both stores — named by ids and names, never row numbers — must be equal, digest for digest.
All of it is one transaction on the target: a refusal or a difference leaves the target as it
was. The source is only read, and the data directory keeps the server's keys and the file
bytes both stores name.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from palimpsest.errors import InvalidInput, Unavailable
from palimpsest.service.core import Core
from palimpsest.service.model import MEMORY_UNAVAILABLE, Wire
from palimpsest.service.storage import copy_store, database_name, open_store


def rows_digest(rows: dict[str, str]) -> str:
    """One digest of a store's projection rows (as ``pal admin rebuild`` reports them)."""
    h = hashlib.sha256()
    for key in sorted(rows):
        h.update(f"{key}\x00{rows[key]}\x00".encode())
    return h.hexdigest()


def move_to_database(data_dir: Path, url: str) -> Wire:
    """Copy the embedded store of ``data_dir`` into the empty database at ``url`` and prove
    the re-derived projections equal (see the module docs).

    Raises:
        InvalidInput: ``data_dir`` holds no embedded store.
        Conflict: target_not_empty — the database already holds a store.
        Unavailable: the stores differ after the copy (nothing is kept), or a database fails.
    """
    if not (data_dir / "palimpsest.db").is_file():
        raise InvalidInput(f"there is no embedded store in {data_dir}", code="no_store",
                           hint="name the data directory with pal admin --data-dir DIR "
                           "migrate --to URL")
    source = open_store(data_dir)
    try:
        target = open_store(data_dir, database=url)
        try:
            with source.read():
                source_rows = source.projection_rows()
                target.review_store()  # Memory Git's tables (made in the schema already)
                with target.write():
                    copied = copy_store(source, target)
                    rebuilt = Core(target, lambda: int(time.time() * 1000)).rebuild(
                        repair=True)
                    target_rows = target.projection_rows()
                    if target_rows != source_rows:
                        differ = sorted(set(source_rows.items()) ^ set(target_rows.items()))
                        raise Unavailable(
                            f"the projections derived on {database_name(url)} differ from "
                            f"the embedded store's ({len(differ)} rows, e.g. "
                            f"{differ[0][0]}); nothing was kept", code=MEMORY_UNAVAILABLE,
                            hint="run pal admin rebuild on the embedded store first; if it "
                            "is equal there, report this")
        finally:
            target.close()
    finally:
        source.close()
    return {"object": "memory.migration", "to": database_name(url), "copied": copied,
            "verified": rebuilt.get("verified"), "records": rebuilt.get("records"),
            "digest_source": rows_digest(source_rows),
            "digest_target": rows_digest(target_rows), "equal": True}


__all__ = ["move_to_database", "rows_digest"]
