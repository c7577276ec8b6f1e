"""Review-desk sessions in the store (issue 15): they expire when idle and at their age limit
(a fake clock), end when their credential is revoked, survive a restart, are shared by every
service over the same data directory, and the store never holds what signs anyone in."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from palimpsest.errors import Forbidden
from palimpsest.service import MemoryService
from palimpsest.service import sessions as session_rules
from palimpsest.service.model import Caller, Session
from tests.conftest import BOTH
from tests.service.conftest import FakeClock
from tests.stored import grep_data_dir

BACKENDS = BOTH  # the store is what these tests exercise

IDLE, MAX = 60.0, 300.0


def _credential(svc: MemoryService, name: str = "alice") -> tuple[Caller, str]:
    member = svc.create_member(name, "human")
    _, secret = svc.issue_credential(member.id, "desk")
    return svc.caller(member.id), secret


def _rows(svc: MemoryService) -> list[tuple[object, ...]]:
    """The stored session rows, read past the service (on its store's own connection)."""
    return [tuple(r) for r in svc._store._db.execute("SELECT * FROM sessions").fetchall()]


def test_sessions_expire_when_idle_and_at_their_age_limit(svc: MemoryService, clock: FakeClock,
                                                          tmp_path: Path) -> None:
    caller, secret = _credential(svc)
    sid, session, opened_as = svc.open_session(secret, idle_seconds=IDLE, max_seconds=MAX)
    assert opened_as == caller and session.member_id == caller.member.id
    assert svc.resume_session(sid, idle_seconds=IDLE) == (session, caller)
    for _ in range(5):  # kept alive by use ...
        clock.tick(50_000)
        assert svc.resume_session(sid, idle_seconds=IDLE) is not None
    clock.tick(51_000)  # ... until the age limit, whatever the activity
    assert svc.resume_session(sid, idle_seconds=IDLE) is None
    # an ended session is forgotten, not kept
    assert [r for r in _rows(svc) if r[0] == session.key] == []
    sid, _, _ = svc.open_session(secret, idle_seconds=IDLE, max_seconds=MAX)
    clock.tick(59_999)
    assert svc.resume_session(sid, idle_seconds=IDLE) is not None
    clock.tick(60_000)  # idle too long
    assert svc.resume_session(sid, idle_seconds=IDLE) is None


def test_the_idle_deadline_moves_to_the_second(svc: MemoryService, clock: FakeClock) -> None:
    _, secret = _credential(svc)
    sid, first, _ = svc.open_session(secret, idle_seconds=IDLE, max_seconds=MAX)
    clock.tick(999)
    found = svc.resume_session(sid, idle_seconds=IDLE)
    assert found is not None and found[0] == first  # nothing written for a burst
    clock.tick(1)
    found = svc.resume_session(sid, idle_seconds=IDLE)
    assert found is not None and found[0].idle_until == first.idle_until + 1000


def test_sessions_are_unguessable_and_closed_on_sign_out(svc: MemoryService) -> None:
    _, secret = _credential(svc)
    first, a, _ = svc.open_session(secret, idle_seconds=IDLE, max_seconds=MAX)
    second, b, _ = svc.open_session(secret, idle_seconds=IDLE, max_seconds=MAX)
    assert first != second and a.csrf != b.csrf and len(first) >= 43 and len(a.csrf) >= 43
    for bad in (None, "", "x" * 500, "caf\u00e9", first + "x"):
        assert svc.resume_session(bad, idle_seconds=IDLE) is None
    svc.close_session(first)
    svc.close_session("never-was")  # ignored
    assert svc.resume_session(first, idle_seconds=IDLE) is None
    assert svc.resume_session(second, idle_seconds=IDLE) is not None


def test_a_wrong_credential_opens_nothing(svc: MemoryService, tmp_path: Path) -> None:
    _, secret = _credential(svc)
    for bad in ("", "pal_hcred_nope_nope", secret[:-2] + "xx", "x" * 300):
        with pytest.raises(Forbidden) as refused:
            svc.open_session(bad, idle_seconds=IDLE, max_seconds=MAX)
        assert refused.value.code == "invalid_credential"
    assert _rows(svc) == []


def test_revoking_the_credential_ends_its_sessions_and_only_those(svc: MemoryService) -> None:
    caller, secret = _credential(svc)
    cred_two, other = svc.issue_credential(caller.member.id, "laptop")
    sid, _, _ = svc.open_session(secret, idle_seconds=IDLE, max_seconds=MAX)
    kept, _, _ = svc.open_session(other, idle_seconds=IDLE, max_seconds=MAX)
    first_cred = next(c for c in svc.list_credentials(caller.member.id) if c.id != cred_two.id)
    svc.revoke_credential(first_cred.id)
    assert svc.resume_session(sid, idle_seconds=IDLE) is None
    assert svc.resume_session(kept, idle_seconds=IDLE) is not None
    svc.revoke_credential(cred_two.id)
    assert svc.resume_session(kept, idle_seconds=IDLE) is None


def test_a_member_keeps_a_bounded_number_of_sessions(svc: MemoryService, clock: FakeClock,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_rules, "MAX_PER_MEMBER", 2)
    _, secret = _credential(svc)
    _, bob_secret = _credential(svc, "bob")
    bob, _, _ = svc.open_session(bob_secret, idle_seconds=IDLE, max_seconds=MAX)
    ids = []
    for _ in range(3):
        clock.tick(10)
        ids.append(svc.open_session(secret, idle_seconds=IDLE, max_seconds=MAX)[0])
    assert svc.resume_session(ids[0], idle_seconds=IDLE) is None  # the oldest went first
    assert all(svc.resume_session(i, idle_seconds=IDLE) is not None for i in ids[1:])
    assert svc.resume_session(bob, idle_seconds=IDLE) is not None  # another member's stays


def test_the_store_holds_no_session_id_and_no_credential_secret(svc: MemoryService,
                                                               tmp_path: Path) -> None:
    """Every byte of the data directory and of the store's database files."""
    _, secret = _credential(svc)
    sid, session, _ = svc.open_session(secret, idle_seconds=IDLE, max_seconds=MAX)
    [row] = _rows(svc)
    assert row[0] == session.key == hashlib.sha256(sid.encode()).hexdigest()
    url = getattr(svc._store, "url", None)
    svc.close()
    assert grep_data_dir(tmp_path / "data", sid, secret, secret.split("_", 3)[3],
                         database=url) == []


def test_a_session_survives_a_restart_and_is_shared_by_every_service(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with MemoryService(data) as first:
        _, secret = _credential(first)
        sid, session, _ = first.open_session(secret, idle_seconds=IDLE, max_seconds=MAX)
    with MemoryService(data) as again, MemoryService(data) as other:  # a restart; a second one
        found = again.resume_session(sid, idle_seconds=IDLE)
        assert found is not None and found[0].csrf == session.csrf
        assert other.resume_session(sid, idle_seconds=IDLE) is not None
        other.close_session(sid)  # signed out through the other one ...
        assert again.resume_session(sid, idle_seconds=IDLE) is None  # ... is out here too


def test_the_rules_are_pure() -> None:
    s = Session("k", "m", "c", "t", created_at=0, idle_until=60_000, expires_at=300_000)
    assert not session_rules.ended(s, 59_999) and session_rules.ended(s, 60_000)
    assert session_rules.touched(s, 500, 60_000) is None
    moved = session_rules.touched(s, 1000, 60_000)
    assert moved is not None and moved.idle_until == 61_000
    late = session_rules.touched(s, 290_000, 60_000)
    assert late is not None and late.idle_until == 300_000  # never past the age limit
    assert session_rules.key_of(None) is None and session_rules.key_of("\u00e9") is None
