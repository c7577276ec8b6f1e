"""The credential cache (service/admin.cached_caller): a secret authenticated once is answered
from memory only while nothing about members, groups, memberships or credentials changed — by
this service or by another process (another connection), which is what ``pal admin`` is."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from palimpsest.errors import Forbidden
from palimpsest.service import MemoryService


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[MemoryService, MemoryService]]:
    """The server's service and, on the same directory, another connection (``pal admin``)."""
    server = MemoryService(tmp_path / "data")
    admin = MemoryService(tmp_path / "data")
    yield server, admin
    admin.close()
    server.close()


def test_only_an_accepted_secret_is_cached(pair: tuple[MemoryService, MemoryService]) -> None:
    server, _ = pair
    made = server.bootstrap_owner()
    assert made is not None
    member, secret = made
    assert server.cached_caller(secret) is None  # never authenticated yet
    with pytest.raises(Forbidden):
        server.authenticate(secret + "x")
    assert server.cached_caller(secret + "x") is None  # a refusal is never remembered
    caller = server.authenticate(secret)
    assert server.cached_caller(secret) == caller
    assert caller.member.id == member.id


@pytest.mark.parametrize("change", ["revoke", "other credential", "new member", "join group",
                                    "leave group"])
def test_any_principal_change_elsewhere_invalidates_the_cache(
        pair: tuple[MemoryService, MemoryService], change: str) -> None:
    server, admin = pair
    made = server.bootstrap_owner()
    assert made is not None
    owner, secret = made
    agent = server.create_member("agent", "agent")
    _, agent_secret = server.issue_credential(agent.id)
    group = server.create_group("team")
    server.add_membership(group.id, agent.id)
    before = server.authenticate(agent_secret)
    assert before.groups == frozenset({group.id})
    assert server.cached_caller(agent_secret) == before
    if change == "revoke":
        cred = admin.list_credentials(agent.id)[0]
        admin.revoke_credential(cred.id)
    elif change == "other credential":
        admin.issue_credential(owner.id)
    elif change == "new member":
        admin.create_member("someone")
    elif change == "join group":
        admin.add_membership(admin.create_group("more").id, agent.id)
    else:
        admin.remove_membership(group.id, agent.id)
    assert server.cached_caller(agent_secret) is None  # the next request re-authenticates
    if change == "revoke":
        with pytest.raises(Forbidden):
            server.authenticate(agent_secret)
        assert server.cached_caller(agent_secret) is None
        return
    after = server.authenticate(agent_secret)
    assert server.cached_caller(agent_secret) == after
    if change == "leave group":
        assert after.groups == frozenset()
    elif change == "join group":
        assert len(after.groups) == 2
    assert server.cached_caller(secret) is None  # the whole cache went, not one entry


def test_a_change_by_the_same_service_invalidates_too(
        pair: tuple[MemoryService, MemoryService]) -> None:
    server, _ = pair
    made = server.bootstrap_owner()
    assert made is not None
    _, secret = made
    server.authenticate(secret)
    cred = server.list_credentials()[0]
    server.revoke_credential(cred.id)
    assert server.cached_caller(secret) is None
    with pytest.raises(Forbidden):
        server.authenticate(secret)
