"""Isolation and refused writes on the review desk, against a started ``pal serve``.

A person holding no grant sees none of another's memories, records, proposals or counts on
any page or fragment (the pages for a real id and a made-up one are the same); writes without
the session's CSRF token, from another origin or another site, or without a session are
refused and change nothing — also when a page on another origin makes a real browser submit
a form to the desk."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from collections.abc import Iterator

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.api.server import ok, pal_command
from tests.ui.conftest import navigates, sign_in
from tests.ui.desk_client import DeskClient
from tests.ui.desk_client import sign_in as desk_sign_in
from tests.ui.world import World

SECRET_WORDS = ("Company", "Acme", "renews", "notice period", "Board", "Hostile", "Q3")


def _paths(world: World) -> dict[str, str]:
    ids = world.ids
    return {
        "memory": f"/ui/memories/{ids['acme']}",
        "records": f"/ui/memories/{ids['acme']}/records",
        "recall": f"/ui/memories/{ids['company']}/records?q=renews",
        "record": f"/ui/memories/{ids['acme']}/records/{ids['fact']}",
        "download": f"/ui/memories/{ids['acme']}/records/{ids['note']}/content/1",
        "proposals": f"/ui/memories/{ids['acme']}/proposals",
        "prime": f"/ui/memories/{ids['acme']}/prime",
        "grants": f"/ui/memories/{ids['acme']}/grants",
        "proposal": f"/ui/proposals/{ids['bob_proposal']}",
    }


def _made_up(path: str, world: World) -> str:
    """The same path with every id replaced by one that does not exist."""
    for key, value in world.ids.items():
        if key.endswith("proposal"):
            path = path.replace(value, "01a20000-0000-7000-8000-000000000000")
        elif value.startswith("hmem_"):
            path = path.replace(value, "hmem_doesnotexist0000000000000")
        elif value.startswith("hrec_"):
            path = path.replace(value, "hrec_doesnotexist0000000000000")
    return path


@pytest.fixture()
def dave(world: World) -> Iterator[DeskClient]:
    """dave, a person without any grant, signed in."""
    client = desk_sign_in(world, "dave")
    yield client
    client.close()


@pytest.fixture()
def carol(world: World) -> Iterator[DeskClient]:
    """carol, who may review in Acme, signed in."""
    client = desk_sign_in(world, "carol")
    yield client
    client.close()


def test_without_grants_nothing_shows(dave: DeskClient, world: World) -> None:
    for path in ("/ui/", "/ui/queue"):
        page = dave.get(path)
        assert page.status_code == 200
        assert not [w for w in SECRET_WORDS if w in page.text], path
    assert 'id="queue-count">0<' in dave.get("/ui/").text
    for name, path in _paths(world).items():
        real, fake = dave.get(path), dave.get(_made_up(path, world))
        assert real.status_code == fake.status_code == 404, (name, real.status_code)
        assert real.text == fake.text, name  # unknown and forbidden look the same
        assert not [w for w in SECRET_WORDS if w in real.text], name
    # Nor can a write reach what cannot be seen: the answer is the same "no such" page.
    pid = world.ids["bob_proposal"]
    for action in ("review", "merge", "cancel"):
        fields = {"csrf": dave.csrf, "verdict": "approve", "reason": "looks fine"}
        real = dave.post(f"/ui/proposals/{pid}/{action}", fields)
        fake = dave.post(f"/ui/proposals/01a20000-0000-7000-8000-000000000000/{action}", fields)
        assert real.status_code == fake.status_code == 404 and real.text == fake.text
    with world.api("alice") as api:
        assert ok(api.get(f"/api/memory/proposals/{pid}"))["status"] == "open"


def test_restricted_branch_stays_hidden_below_a_grant(world: World) -> None:
    bob = desk_sign_in(world, "bob")  # read and write on Company; Board is restricted
    try:
        page = bob.get(f"/ui/memories/{world.ids['company']}")
        assert "Acme" in page.text and "Board" not in page.text
        assert "<dt>Children</dt><dd>2</dd>" in page.text  # the count skips Board too
        assert bob.get(f"/ui/memories/{world.ids['board']}").status_code == 404
        assert bob.get(f"/ui/memories/{world.ids['acme']}/grants").status_code == 403
    finally:
        bob.close()


def test_writes_without_the_token_or_from_elsewhere_are_refused(carol: DeskClient,
                                                                world: World) -> None:
    pid = world.ids["bob_proposal"]
    path = f"/ui/proposals/{pid}/review"
    good = {"csrf": carol.csrf, "verdict": "approve", "reason": "fine"}
    here = world.server.url
    port = here.rsplit(":", 1)[1]
    refused = [
        ("no token", carol.post(path, {"verdict": "approve", "reason": "fine"}), 403),
        ("wrong token", carol.post(path, {**good, "csrf": "x" * 43}), 403),
        ("token twice", carol.http.post(path, content=f"csrf={carol.csrf}&csrf={carol.csrf}"
                                        "&verdict=approve&reason=fine",
                                        headers={"Content-Type":
                                                 "application/x-www-form-urlencoded"}), 400),
        ("other port", carol.post(path, good, Origin="http://127.0.0.1:1"), 403),
        ("other scheme", carol.post(path, good, Origin=f"https://127.0.0.1:{port}"), 403),
        ("other host", carol.post(path, good, Origin="http://evil.example"), 403),
        ("cross-site fetch", carol.post(path, good, **{"Sec-Fetch-Site": "cross-site"}), 403),
        ("same-site fetch", carol.post(path, good, **{"Sec-Fetch-Site": "same-site"}), 403),
        ("json", carol.http.post(path, json=good), 415),
        ("no session", httpx.post(here + path, data=good, cookies={"pal_desk": "forged"}), 403),
        ("sign-out without token", carol.post("/ui/sign-out", {"x": "1"}), 403),
    ]
    for name, response, status in refused:
        assert response.status_code == status, (name, response.status_code, response.text)
    assert carol.get("/ui/queue").status_code == 200  # still signed in
    with world.api("alice") as api:
        doc = ok(api.get(f"/api/memory/proposals/{pid}"))
    assert doc["status"] == "open" and doc["reviews"] == []
    # The same form from this origin with the token goes through (the refusals were real);
    # on alice's proposal, which no other test of this module looks at.
    other = world.ids["alice_proposal"]
    assert carol.post(f"/ui/proposals/{other}/review",
                      {**good, "verdict": "request_changes", "reason": "cite it"},
                      Origin=here, **{"Sec-Fetch-Site": "same-origin"}).status_code == 303
    with world.api("alice") as api:
        assert ok(api.get(f"/api/memory/proposals/{other}"))["status"] == "changes_requested"


def test_a_reason_is_required_by_the_server(carol: DeskClient, world: World) -> None:
    pid = world.ids["erin_proposal"]
    page = carol.post(f"/ui/proposals/{pid}/review",
                      {"csrf": carol.csrf, "verdict": "reject", "reason": "   "})
    assert page.status_code == 400
    assert "a reason is required for every verdict; say why in the reason field" in page.text
    with world.api("alice") as api:
        assert ok(api.get(f"/api/memory/proposals/{pid}"))["status"] == "open"


def test_every_page_sends_the_security_headers(carol: DeskClient, world: World) -> None:
    pages = ["/ui/", "/ui/queue", "/ui/sign-in", *_paths(world).values()]
    for path in pages:
        response = carol.get(path)
        csp = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp, path
        assert "script-src" not in csp and "default-src 'none'" in csp, path
        assert response.headers["x-content-type-options"] == "nosniff", path
        assert response.headers["x-frame-options"] == "DENY", path
        assert response.headers["cache-control"].startswith(("no-store", "private")), path
    assert "sandbox" in carol.get(_paths(world)["download"]).headers["content-security-policy"]


def test_a_revoked_credential_ends_its_sessions(world: World) -> None:
    erin = desk_sign_in(world, "erin")
    try:
        assert erin.get("/ui/queue").status_code == 200
        listing = subprocess.run(
            pal_command("admin", "--data-dir", str(world.server.data_dir), "credential", "list",
                        "--member", world.members["erin"].id, "--json"),
            check=True, capture_output=True, text=True)
        (credential,) = json.loads(listing.stdout)
        subprocess.run(pal_command("admin", "--data-dir", str(world.server.data_dir),
                                   "credential", "revoke", credential["id"]),
                       check=True, capture_output=True)
        gone = erin.get("/ui/queue")
        assert gone.status_code == 303 and gone.headers["location"].startswith("/ui/sign-in")
    finally:
        erin.close()


class _Evil(http.server.BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *args: object) -> None:
        pass


def test_a_form_on_another_origin_cannot_act(browser: WebDriver, world: World) -> None:
    """A page on another port of the same host (same site, so the Strict cookie is sent) that
    even knows carol's CSRF token cannot make her browser review."""
    pid = world.ids["erin_proposal"]
    sign_in(browser, world, "carol")
    browser.get(f"{world.server.url}/ui/proposals/{pid}")
    token = browser.find_element(By.NAME, "csrf").get_attribute("value")
    action = f"{world.server.url}/ui/proposals/{pid}/review"
    _Evil.page = (
        f'<form method="post" action="{action}"><input name="csrf" value="{token}">'
        '<input name="verdict" value="approve"><input name="reason" value="auto">'
        '<button id="go">win a prize</button></form>').encode()
    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Evil)
    thread = threading.Thread(target=evil.serve_forever, daemon=True)
    thread.start()
    try:
        browser.get(f"http://127.0.0.1:{evil.server_address[1]}/")
        navigates(browser, browser.find_element(By.ID, "go"))
        assert "cross-origin requests are refused" in browser.page_source
    finally:
        evil.shutdown()
        evil.server_close()
    with world.api("alice") as api:
        doc = ok(api.get(f"/api/memory/proposals/{pid}"))
    assert doc["status"] == "open" and doc["reviews"] == []
