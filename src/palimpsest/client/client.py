"""The clients: :class:`Client` (synchronous) and :class:`AsyncClient`, over httpx.

Both have the same namespaces with the same methods (each written once, in :mod:`.uhp` and
:mod:`.memory_git`)::

    with Client("http://127.0.0.1:8765", credential) as pal:
        team = pal.memories.create("Team", description="What the team decided")
        pal.records.remember(team["id"], "We ship on Thursdays.", type="fact")
        hits = pal.recall(team["id"], "when do we ship")["results"]

    async with AsyncClient.from_env() as pal:
        await pal.memories.list()

A refusal raises the :mod:`palimpsest.errors` tree (``NotFound``, ``Forbidden``,
``InvalidInput``, ``Conflict``, ``Unavailable``) with the server's ``code``, ``message`` and
``hint``; a server that does not answer raises ``Unavailable(code="unreachable")``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import TracebackType
from typing import Any, Generic

import httpx

from palimpsest.client import memory_git as mg
from palimpsest.client import uhp
from palimpsest.client.transport import (
    DEFAULT_URL,
    Async,
    AsyncTransport,
    M,
    Namespace,
    Sync,
    SyncTransport,
    op,
)
from palimpsest.errors import InvalidInput


class Memories(Namespace[M]):
    """The tree of memories."""

    create = op(uhp.create_memory)
    list = op(uhp.list_memories)
    get = op(uhp.get_memory)
    update = op(uhp.update_memory)
    delete = op(uhp.delete_memory)


class Grants(Namespace[M]):
    """Who may do what on a memory (inherited down the tree)."""

    list = op(uhp.list_grants)
    put = op(uhp.put_grant)
    delete = op(uhp.delete_grant)


class Records(Namespace[M]):
    """Records: remember, read, revise, forget, erase."""

    remember = op(uhp.remember)
    list = op(uhp.list_records)
    get = op(uhp.get_record)
    history = op(uhp.record_history)
    content = op(uhp.record_content)
    revise = op(uhp.revise)
    forget = op(uhp.forget)
    erase = op(uhp.erase)
    operate = op(uhp.operate)


class Files(Namespace[M]):
    """File bytes for file parts."""

    upload = op(uhp.upload_file)


class Queries(Namespace[M]):
    """Named and free queries."""

    list = op(uhp.list_queries)
    put = op(uhp.put_query)
    run = op(uhp.run_query)
    free = op(uhp.free_query)


class Snapshots(Namespace[M]):
    """Named instants of a memory."""

    create = op(uhp.create_snapshot)
    list = op(uhp.list_snapshots)


class Consolidations(Namespace[M]):
    """The deterministic consolidator's runs."""

    start = op(uhp.consolidate)
    list = op(uhp.list_consolidations)
    get = op(uhp.get_consolidation)
    changes = op(uhp.consolidation_changes)
    revert = op(uhp.revert_consolidation)


class Harnesses(Namespace[M]):
    """A harness's default memory and observe setting."""

    get = op(uhp.harness_memories)
    put = op(uhp.set_harness_memories)


class MemoryGit(Namespace[M]):
    """Reviewed, versioned memory: refs, changesets, proposals, reviews, signed merges."""

    projects = op(mg.projects)
    init = op(mg.init)
    refs = op(mg.refs)
    ref = op(mg.get_ref)
    branch = op(mg.branch)
    advance = op(mg.advance)
    merge = op(mg.merge)
    commit = op(mg.commit)
    changeset = op(mg.changeset)
    log = op(mg.log)
    diff = op(mg.diff)
    context = op(mg.context)
    pin_context = op(mg.pin_context)
    manifest = op(mg.manifest)
    detect_conflicts = op(mg.detect_conflicts)
    conflicts = op(mg.conflicts)
    resolve_conflict = op(mg.resolve_conflict)
    persist_conflicts = op(mg.persist_conflicts)
    retire_conflicts = op(mg.retire_conflicts)
    propose = op(mg.propose)
    proposals = op(mg.proposals)
    proposal = op(mg.proposal)
    review = op(mg.review)
    cancel = op(mg.cancel)
    authorize = op(mg.authorize)
    settings = op(mg.settings)
    put_settings = op(mg.put_settings)
    reviewed_write = op(mg.reviewed_write)


class _Api(Namespace[M], Generic[M]):
    """Everything the two clients share: the namespaces and the memory-level routes."""

    discovery = op(uhp.discovery)
    providers = op(uhp.providers)
    types = op(uhp.types)
    recall = op(uhp.recall)
    graph = op(uhp.graph)
    prime = op(uhp.prime)
    observe = op(uhp.observe)
    job = op(uhp.get_job)
    health = op(uhp.health)
    ready = op(uhp.ready)
    metrics = op(uhp.metrics)

    def __init__(self, transport: SyncTransport | AsyncTransport) -> None:
        super().__init__(transport)
        self.memories: Memories[M] = Memories(transport)
        self.grants: Grants[M] = Grants(transport)
        self.records: Records[M] = Records(transport)
        self.files: Files[M] = Files(transport)
        self.queries: Queries[M] = Queries(transport)
        self.snapshots: Snapshots[M] = Snapshots(transport)
        self.consolidations: Consolidations[M] = Consolidations(transport)
        self.harnesses: Harnesses[M] = Harnesses(transport)
        self.memory_git: MemoryGit[M] = MemoryGit(transport)


def read_credential(path: Path | None = None) -> str | None:
    """The credential in ``path`` (a private file: refused when others may read it), else
    ``$PAL_CREDENTIAL``, else ``None``.

    Raises:
        InvalidInput: the file is readable by its group or others, or cannot be read.
    """
    if path is None:
        return os.environ.get("PAL_CREDENTIAL", "").strip() or None
    try:
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise InvalidInput(f"{path} is readable by others", code="credential-file-mode",
                               hint=f"chmod 600 {path}")
        return path.read_text(encoding="utf-8").strip() or None
    except OSError as exc:
        raise InvalidInput(f"cannot read the credential file {path}: {exc.strerror}",
                           code="credential-file") from exc


def _headers(credential: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"} if credential else {}


class Client(_Api[Sync]):
    """The synchronous client of one server with one credential (``None``: public routes
    only)."""

    def __init__(self, url: str = DEFAULT_URL, credential: str | None = None, *,
                 timeout: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, headers=_headers(credential),
                                 timeout=timeout, transport=transport)
        super().__init__(SyncTransport(self.http))

    @classmethod
    def from_env(cls, **kwargs: Any) -> Client:
        """``$PAL_URL`` (default ``http://127.0.0.1:8765``) and ``$PAL_CREDENTIAL``."""
        return cls(os.environ.get("PAL_URL") or DEFAULT_URL, read_credential(), **kwargs)

    def close(self) -> None:
        """Close the connections."""
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class AsyncClient(_Api[Async]):
    """The asynchronous client: the same methods as :class:`Client`, awaited."""

    def __init__(self, url: str = DEFAULT_URL, credential: str | None = None, *,
                 timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.http = httpx.AsyncClient(base_url=self.url, headers=_headers(credential),
                                      timeout=timeout, transport=transport)
        super().__init__(AsyncTransport(self.http))

    @classmethod
    def from_env(cls, **kwargs: Any) -> AsyncClient:
        """``$PAL_URL`` (default ``http://127.0.0.1:8765``) and ``$PAL_CREDENTIAL``."""
        return cls(os.environ.get("PAL_URL") or DEFAULT_URL, read_credential(), **kwargs)

    async def aclose(self) -> None:
        """Close the connections."""
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


__all__ = ["AsyncClient", "Client", "read_credential"]
