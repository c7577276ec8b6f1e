"""The review desk as an ASGI app, mounted by the API at ``/ui`` (same process, same service).

:func:`create_desk` wires the routes: sign-in and sign-out here, the pages in :mod:`.pages`,
the request rules (session, CSRF, origin) in :mod:`.desk`. Handlers gather what a page needs
with one trip to the service thread (``invoke``, the API's runner), through
:class:`~.facade.DeskService`, and render a template (:mod:`.render`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from palimpsest.errors import Forbidden, PalError
from palimpsest.service.memories import MemoryService
from palimpsest.service.memorygit.flow import ReviewFlow
from palimpsest.ui import pages
from palimpsest.ui.desk import (
    COOKIE,
    SIGNIN_COOKIE,
    Desk,
    DeskConfig,
    Invoke,
    Refused,
    Visit,
    set_cookie,
)
from palimpsest.ui.facade import DeskService
from palimpsest.ui.render import PREFIX, SECURITY_HEADERS, href
from palimpsest.ui.sessions import new_token, same_token


# --- sign-in and sign-out ---------------------------------------------------------------------
async def sign_in_page(desk: Desk, request: Request) -> Response:
    """The sign-in form (a double-submit token guards it before any session exists)."""
    token = new_token()
    notice = {"out": "You are signed out.", "expired": "Please sign in."}.get(
        request.query_params.get("n", ""), "")
    response = desk.html("sign_in.html", signin_token=token, notice=notice, problem="")
    set_cookie(response, request, SIGNIN_COOKIE, token, max_age=600)
    return response


async def sign_in(desk: Desk, request: Request) -> Response:
    """Check the credential with the service; open a session on success."""
    try:
        fields = await desk.form(request, None)
        if not same_token(fields.get("signin_token"), request.cookies.get(SIGNIN_COOKIE, "")):
            raise Refused(403, "the sign-in form expired or came from elsewhere; reload it")
    except Refused as refusal:
        return desk.html("error.html", refusal.status, None, message=refusal.message)
    credential = fields.get("credential", "").strip()
    previous = request.cookies.get(COOKIE)  # never kept across a sign-in
    config = desk.config
    try:
        session_id, _, _ = await desk.run(lambda: desk.calls.sign_in(
            credential, previous, idle_seconds=config.idle_seconds,
            max_seconds=config.max_seconds))
    except Forbidden:
        token = new_token()
        response = desk.html("sign_in.html", 401, signin_token=token, notice="",
                             problem="the credential is unknown or revoked")
        set_cookie(response, request, SIGNIN_COOKIE, token, max_age=600)
        return response
    except PalError as exc:
        return desk.error(exc, None)
    response = RedirectResponse(href(""), status_code=303, headers=dict(SECURITY_HEADERS))
    set_cookie(response, request, COOKIE, session_id, max_age=int(config.max_seconds))
    response.delete_cookie(SIGNIN_COOKIE, path=PREFIX)
    return response


async def sign_out(desk: Desk, request: Request) -> Response:
    """Forget the session (CSRF-checked like every write)."""
    try:
        visit = await desk.visit(request)
    except PalError as exc:
        return desk.error(exc, None)
    try:
        if visit is None:
            raise Refused(403, "you are not signed in")
        await desk.form(request, visit)
    except Refused as refusal:
        return desk.html("error.html", refusal.status, visit, message=refusal.message)
    session_id = request.cookies.get(COOKIE)
    await desk.run(lambda: desk.calls.sign_out(session_id))
    response = RedirectResponse(href("sign-in", n="out"), status_code=303,
                                headers=dict(SECURITY_HEADERS))
    response.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict",
                           secure=request.url.scheme == "https")
    return response


# --- wiring -----------------------------------------------------------------------------------
Handler = Callable[[Desk, Request, Visit], Awaitable[Response]]


def _page(desk: Desk, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            visit = await desk.visit(request)
        except PalError as exc:
            return desk.error(exc, None)
        if visit is None:
            if request.method != "GET":
                return desk.html("error.html", 403, None,
                                 message="you are not signed in; sign in and try again")
            return RedirectResponse(href("sign-in", n="expired"), status_code=303,
                                    headers=dict(SECURITY_HEADERS))
        try:
            return await handler(desk, request, visit)
        except Refused as refusal:
            return desk.html("error.html", refusal.status, visit, message=refusal.message)
        except PalError as exc:
            return desk.error(exc, visit)

    return endpoint


def _plain(desk: Desk, handler: Callable[[Desk, Request], Awaitable[Response]]) -> Callable[
        [Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await handler(desk, request)

    return endpoint


async def _static(request: Request) -> Response:
    name = request.path_params["name"]
    data = pages.static_asset(name)
    if data is None:
        return Response("not found", status_code=404, media_type="text/plain",
                        headers=dict(SECURITY_HEADERS))
    headers = {**SECURITY_HEADERS, "cache-control": "private, max-age=300"}
    return Response(data, media_type="text/css; charset=utf-8", headers=headers)


def create_desk(svc: MemoryService, flow: ReviewFlow, invoke: Invoke,
                config: DeskConfig | None = None) -> Starlette:
    """The desk over ``svc`` and its Memory Git ``flow``; ``invoke`` runs a callable on the
    service thread (the API's runner)."""
    desk = Desk(DeskService(svc, flow), invoke, config or DeskConfig.from_env())
    routes = [
        Route("/", _page(desk, pages.tree), methods=["GET"]),
        Route("/sign-in", _plain(desk, sign_in_page), methods=["GET"]),
        Route("/sign-in", _plain(desk, sign_in), methods=["POST"]),
        Route("/sign-out", _plain(desk, sign_out), methods=["POST"]),
        Route("/static/{name}", _static, methods=["GET"]),
        Route("/queue", _page(desk, pages.queue), methods=["GET"]),
        Route("/memories/{mid}", _page(desk, pages.memory), methods=["GET"]),
        Route("/memories/{mid}/records", _page(desk, pages.records), methods=["GET"]),
        Route("/memories/{mid}/records/{rid}", _page(desk, pages.record), methods=["GET"]),
        Route("/memories/{mid}/records/{rid}/content/{index:int}",
              _page(desk, pages.download), methods=["GET"]),
        Route("/memories/{mid}/proposals", _page(desk, pages.proposals), methods=["GET"]),
        Route("/memories/{mid}/prime", _page(desk, pages.prime), methods=["GET"]),
        Route("/memories/{mid}/grants", _page(desk, pages.grants), methods=["GET"]),
        Route("/proposals/{pid}", _page(desk, pages.proposal), methods=["GET"]),
        Route("/proposals/{pid}/{action}", _page(desk, pages.act), methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.state.desk = desk
    return app


__all__ = ["create_desk"]
