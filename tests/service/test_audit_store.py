"""The audit table on both stores: entries append in order and read back newest first through
every filter, retention deletes by age only, and an update is refused by the store itself."""

from __future__ import annotations

import pytest

from palimpsest.errors import PalError
from palimpsest.service.model import AuditEntry
from palimpsest.service.storage import open_store
from tests.conftest import BOTH, Backend

BACKENDS = BOTH


def _entry(at: int, member: str, memory: str | None, outcome: str) -> AuditEntry:
    return AuditEntry(at=at, surface="http", action="POST /v1/memories/{memory_id}/records",
                      outcome=outcome, reason=None if outcome == "ok" else "memory_forbidden",
                      status=200 if outcome == "ok" else 403, member_id=member,
                      credential_id="hcred_x", memory_id=memory, request_id=f"r{at}")


def test_append_filter_prune_and_no_update(backend: Backend) -> None:
    store = open_store(backend.data_dir, database=backend.database_url)
    try:
        with store.write():
            store.append_audit([_entry(1000, "hmbr_a", "hmem_1", "ok"),
                                _entry(2000, "hmbr_b", "hmem_1", "refused"),
                                _entry(3000, "hmbr_a", "hmem_2", "refused")])
        with store.read():
            every = store.audit_entries()
            assert [e.request_id for e in every] == ["r3000", "r2000", "r1000"]
            assert every[0].seq > every[1].seq > every[2].seq
            stored = every[2].to_wire()
            assert stored == {**_entry(1000, "hmbr_a", "hmem_1", "ok").to_wire(),
                              "seq": stored["seq"]}
            assert [e.at for e in store.audit_entries(member_id="hmbr_a")] == [3000, 1000]
            assert [e.at for e in store.audit_entries(memory_id="hmem_1")] == [2000, 1000]
            assert [e.at for e in store.audit_entries(outcome="refused", member_id="hmbr_a")] \
                == [3000]
            assert [e.at for e in store.audit_entries(since=2000, until=3000)] == [2000]
            assert len(store.audit_entries(limit=1)) == 1
        with store.write():
            assert store.prune_audit(2500) == 2
        with store.read():
            assert [e.at for e in store.audit_entries()] == [3000]
        with pytest.raises(PalError) as refused, store.write():
            store._x("UPDATE audit SET outcome = 'ok'")
        assert "append-only" in str(refused.value)
    finally:
        store.close()
