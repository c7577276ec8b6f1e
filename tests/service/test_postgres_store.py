"""What the PostgreSQL store guarantees between connections (as between processes): a ref moves
by compare-and-swap in SQL, a memory's writers queue on an advisory lock, an idempotency key
and a merge nonce are decided by their unique keys, a principals change is seen by every other
store at once; its schema is versioned and a newer one is refused. Two stores over one
database stand for two ``pal serve`` processes (each has its own pool of connections).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from palimpsest.errors import Conflict, Unavailable
from palimpsest.service.model import Member, Ref
from palimpsest.service.storage import open_store
from palimpsest.service.storage.protocol import Store
from tests.api.server import pal_command
from tests.conftest import Backend

pytestmark = pytest.mark.postgres
BACKENDS = ("postgresql",)  # what only a server database has to prove


@pytest.fixture
def url(backend: Backend) -> str:
    assert backend.database_url is not None
    return backend.database_url


@pytest.fixture
def stores(url: str, tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    first, second = open_store(tmp_path / "a", database=url), open_store(tmp_path / "b",
                                                                         database=url)
    yield first, second
    first.close()
    second.close()


def _ref(head: str, when: str = "2026-12-02T00:00:00Z") -> Ref:
    return Ref("hmem_x", "refs/shared/main", head, False, "member:a", when, when)


def _waiting(url: str) -> int:
    """Backends of this database waiting for a lock (row, key or advisory)."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a "
                           "ON a.pid = l.pid WHERE NOT l.granted AND a.datname = "
                           "current_database()").fetchone()
    return int(row[0]) if row else 0


def _race(url: str, hold: Store, other: Store, first: Callable[[], None],
          second: Callable[[], None]) -> list[Any]:
    """Run ``first`` in a write of ``hold``; while it is open, ``second`` in a write of
    ``other`` (another connection) until it waits on a lock; then commit ``first``. Returns
    what ``second`` raised (or ``None``)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            with other.write():
                second()
            outcome.append(None)
        except (Conflict, Unavailable) as exc:
            outcome.append(exc)

    with hold.write():
        first()
        thread = threading.Thread(target=run)
        thread.start()
        while _waiting(url) == 0 and thread.is_alive():
            time.sleep(0.01)  # until PostgreSQL itself says the second writer waits
    thread.join(timeout=60)
    assert not thread.is_alive()
    return outcome


def test_two_first_heads_one_wins_by_the_unique_key(url: str,
                                                    stores: tuple[Store, Store]) -> None:
    a, b = stores
    [lost] = _race(url, a, b, lambda: a.advance_ref(_ref("c1"), expected=None),
                   lambda: b.advance_ref(_ref("c2"), expected=None))
    assert isinstance(lost, Conflict) and lost.code == "cas_mismatch"
    with b.read():
        found = b.ref("hmem_x", "refs/shared/main")
    assert found is not None and found.head == "c1"


def test_a_moved_ref_refuses_the_stale_expectation(url: str,
                                                   stores: tuple[Store, Store]) -> None:
    a, b = stores
    with a.write():
        a.advance_ref(_ref("c1"), expected=None)
    [lost] = _race(url, a, b, lambda: a.advance_ref(_ref("c2"), expected="c1"),
                   lambda: b.advance_ref(_ref("c3"), expected="c1"))
    assert isinstance(lost, Conflict) and lost.code == "cas_mismatch"
    assert "current head c2" in str(lost)
    with b.read():
        found = b.ref("hmem_x", "refs/shared/main")
    assert found is not None and found.head == "c2"  # no forked ref, no lost move


def test_writers_of_one_memory_queue_on_its_advisory_lock(url: str,
                                                         stores: tuple[Store, Store]) -> None:
    a, b = stores
    order: list[str] = []
    outcome = _race(url, a, b, lambda: (a.lock_memory("hmem_x"), order.append("a")),
                    lambda: (b.lock_memory("hmem_x"), order.append("b")))
    assert outcome == [None] and order == ["a", "b"]
    with a.write(), b.write():  # two memories never meet on the lock
        a.lock_memory("hmem_x")
        b.lock_memory("hmem_y")


def test_a_second_first_use_of_an_idempotency_key_is_a_conflict(
        url: str, stores: tuple[Store, Store]) -> None:
    a, b = stores
    def remember(store: Store, answer: str) -> Callable[[], None]:
        return lambda: store.remember_response("member:a", "hmem_x", "k1", "ab" * 32,
                                               {"id": answer}, 1)

    [lost] = _race(url, a, b, remember(a, "first"), remember(b, "second"))
    assert isinstance(lost, Conflict) and lost.code == "idempotency_race"
    with b.read():
        assert b.replay("member:a", "hmem_x", "k1") == ("ab" * 32, {"id": "first"})


def test_a_merge_nonce_is_consumed_once_whichever_process_uses_it(
        stores: tuple[Store, Store]) -> None:
    a, b = stores
    ga, gb = a.review_store(), b.review_store()
    ga.create_ref("hmem_x", "refs/shared/main", "c0", protected=True, created_by="member:a",
                  now="2026-12-02T00:00:00Z")
    proposal = {"proposal_id": "hprop_1", "project_id": "hmem_x", "status": "open",
                "originator_principal": "member:a", "created_at": "2026-12-02T00:00:00Z"}
    ga.put_proposal(proposal, key=None, request_digest=None, conflicts=[])
    merged = {**proposal, "status": "merged"}

    def advance(g: Any, new: str, expected: str) -> None:
        g.advance_protected(project="hmem_x", ref_name="refs/shared/main", expected=expected,
                            new=new, nonce="n-1", advance={"advance_id": f"adv_{new}"},
                            proposal=merged, now="2026-12-02T00:00:01Z")

    advance(ga, "c1", "c0")
    with pytest.raises(Conflict) as exc:
        advance(gb, "c2", "c1")  # the ref still holds what it expects: only the nonce refuses
    assert exc.value.code == "authorization_replay"
    assert gb.ref("hmem_x", "refs/shared/main")["head_changeset_id"] == "c1"
    assert gb.nonce_consumed("n-1")


def test_a_principals_change_is_seen_by_every_other_store(stores: tuple[Store, Store]) -> None:
    a, b = stores
    with b.read():
        before = b.principals_generation()
    peeked = b.peek_principals_generation()
    assert peeked == before
    with a.write():
        a.insert_member(Member("hmbr_x", "x", "human", False, 1))
    with b.read():
        assert b.principals_generation() > before
    assert (b.peek_principals_generation() or 0) > before


def test_migrate_schema_reports_and_a_newer_schema_is_refused(url: str,
                                                             tmp_path: Path) -> None:
    run = subprocess.run(pal_command("admin", "--database", url, "--json", "migrate-schema"),
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["applied"] == [] and report["found"] == report["schema"] >= 1
    password = url.split("@", maxsplit=1)[0].rsplit(":", maxsplit=1)[-1]
    assert "@" in report["database"] and password not in run.stdout
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema'")
    with pytest.raises(Unavailable) as exc:
        open_store(tmp_path / "data", database=url)
    assert exc.value.code == "memory_unavailable" and "schema 999" in str(exc.value)
    refused = subprocess.run(pal_command("admin", "--database", url, "migrate-schema"),
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0 and "999" in refused.stderr


def test_an_unreachable_database_is_unavailable(tmp_path: Path, url: str) -> None:
    wrong = url.replace("postgres:", "postgres:x", 1)  # a wrong password
    with pytest.raises(Unavailable) as exc:
        open_store(tmp_path / "data", database=wrong)
    assert exc.value.code == "memory_unavailable"
    assert wrong.split("@")[0].split(":")[-1] not in str(exc.value)  # no password echoed
