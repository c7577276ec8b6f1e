"""``/docs``: a page that renders ``/openapi.json``, with every asset shipped in the package.

Nothing is loaded from a CDN or any other host: the page, its script and its style come from
:mod:`palimpsest.api` (``assets/``), under a Content-Security-Policy that allows only this
origin, and the script inserts the document's text as text, never as markup. The page and the
document need no credential (the guard's public paths).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Final

from fastapi import FastAPI
from fastapi.responses import Response

ASSETS: Final = {
    "/docs": ("docs.html", "text/html; charset=utf-8"),
    "/docs/docs.js": ("docs.js", "text/javascript; charset=utf-8"),
    "/docs/docs.css": ("docs.css", "text/css; charset=utf-8"),
}
CSP: Final = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
              "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def _asset(body: bytes, media: str) -> Callable[[], Awaitable[Response]]:
    async def asset() -> Response:
        return Response(body, media_type=media, headers={
            "content-security-policy": CSP, "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer", "cache-control": "no-cache"})

    return asset


def install(app: FastAPI) -> None:
    """Serve the page and its assets on ``app`` (outside the OpenAPI document)."""
    folder = resources.files("palimpsest.api") / "assets"
    for path, (name, media) in ASSETS.items():
        app.add_api_route(path, _asset((folder / name).read_bytes(), media), methods=["GET"],
                          include_in_schema=False)


__all__ = ["ASSETS", "CSP", "install"]
