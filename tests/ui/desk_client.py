"""A plain HTTP client of the review desk (no browser): sign in through the form, keep the
session cookie, read the CSRF token off a page, post forms. For the checks a browser would
hide — refused writes, headers, every fragment a person without grants might reach."""

from __future__ import annotations

import re
from dataclasses import dataclass

import httpx

from tests.ui.world import World

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_SIGNIN = re.compile(r'name="signin_token" value="([^"]+)"')


@dataclass
class DeskClient:
    """One signed-in person on the desk."""

    http: httpx.Client
    csrf: str

    def get(self, path: str) -> httpx.Response:
        """A page (redirects are not followed)."""
        return self.http.get(path)

    def post(self, path: str, fields: dict[str, str], **headers: str) -> httpx.Response:
        """A form post (redirects are not followed)."""
        return self.http.post(path, data=fields, headers=headers)

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()


def sign_in(world: World, name: str) -> DeskClient:
    """Sign in as ``name`` with the desk's form; returns the client holding the session."""
    http = httpx.Client(base_url=world.server.url, follow_redirects=False, timeout=30.0)
    page = http.get("/ui/sign-in")
    token = _SIGNIN.search(page.text)
    assert token is not None, page.text
    done = http.post("/ui/sign-in", data={"signin_token": token.group(1),
                                          "credential": world.members[name].token})
    assert done.status_code == 303 and done.headers["location"] == "/ui/", done.text
    home = http.get("/ui/")
    found = _CSRF.search(home.text)
    assert home.status_code == 200 and found is not None, home.text
    return DeskClient(http, found.group(1))


__all__ = ["DeskClient", "sign_in"]
