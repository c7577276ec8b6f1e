"""Sessions expire on a running ``pal serve`` (``PAL_DESK_IDLE_SECONDS``), and signing in
again gives a new session id (no fixation)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.api.server import Member, provision, start
from tests.ui.desk_client import sign_in
from tests.ui.world import World


def test_an_idle_session_expires(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    members = {k: v for k, v in provision(data_dir, [("alice", "human")]).items()
               if isinstance(v, Member)}
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
