"""Desk sessions on running ``pal serve`` processes: they expire (``PAL_DESK_IDLE_SECONDS``),
signing in again gives a new session id (no fixation), a session survives a restart of the
server, two servers over one data directory share it (sign-out on one is sign-out on both),
and revoking its credential from another process ends it on both."""

from __future__ import annotations

import time
from pathlib import Path

from palimpsest.service.memories import MemoryService
from tests.api.server import Member, provision, start
from tests.ui.desk_client import sign_in
from tests.ui.world import World


def _members(data_dir: Path) -> dict[str, Member]:
    return {k: v for k, v in provision(data_dir, [("alice", "human")]).items()
            if isinstance(v, Member)}


def test_an_idle_session_expires(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    members = _members(data_dir)
    server = start(data_dir, env={"PAL_DESK_IDLE_SECONDS": "1"})
    try:
        world = World(server, members)
        desk = sign_in(world, "alice")
        first = desk.http.cookies["pal_desk"]
        assert desk.get("/ui/queue").status_code == 200
        time.sleep(1.5)
        gone = desk.get("/ui/queue")
        assert gone.status_code == 303 and gone.headers["location"] == "/ui/sign-in?n=expired"
        desk.close()
        again = sign_in(world, "alice")
        assert again.http.cookies["pal_desk"] != first
        again.close()
    finally:
        server.stop()


def test_a_session_survives_a_restart_and_is_shared_by_two_servers(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    members = _members(data_dir)
    server = start(data_dir)
    try:
        desk = sign_in(World(server, members), "alice")
        home = desk.get("/ui/")
        assert home.status_code == 200 and desk.csrf in home.text
        server.stop()
        server = start(data_dir)  # a restart on another port: the same cookie still works
        other = start(data_dir)  # and a second process over the same store
        try:
            for url in (server.url, other.url):
                page = desk.http.get(url + "/ui/")
                assert page.status_code == 200 and desk.csrf in page.text, url
            # Sign out on the second server (its form, its origin) ...
            out = desk.http.post(other.url + "/ui/sign-out", data={"csrf": desk.csrf})
            assert out.status_code == 303 and "/ui/sign-in" in out.headers["location"]
            # ... and the session is over on the first one too.
            gone = desk.http.get(server.url + "/ui/queue")
            assert gone.status_code == 303 and "/ui/sign-in" in gone.headers["location"]
        finally:
            other.stop()
        desk.close()
    finally:
        server.stop()


def test_revoking_the_credential_ends_the_session_in_every_process(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    members = _members(data_dir)
    one, two = start(data_dir), start(data_dir)
    try:
        desk = sign_in(World(one, members), "alice")
        assert desk.http.get(two.url + "/ui/queue").status_code == 200
        with MemoryService(data_dir) as admin:  # pal admin, in a third process
            [credential] = admin.list_credentials(members["alice"].id)
            admin.revoke_credential(credential.id)
        for url in (one.url, two.url):
            gone = desk.http.get(url + "/ui/queue")
            assert gone.status_code == 303 and "/ui/sign-in" in gone.headers["location"], url
        desk.close()
    finally:
        one.stop()
        two.stop()
