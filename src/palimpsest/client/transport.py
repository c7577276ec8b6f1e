"""One request description, two ways to send it: the machinery under the typed clients.

Every route of the HTTP API is written once, as a function that builds a :class:`Call` (method,
path, query, body, headers, the type of the answer). An :class:`op` on a :class:`Namespace`
turns such a builder into a method: on a namespace of the synchronous client it returns the
answer, on one of the asynchronous client an awaitable of it — same arguments, same types,
same documentation, one definition.

A refusal becomes the project's error tree (:mod:`palimpsest.errors`), whichever of the two
error bodies the route uses: the UHP envelope ``{"error": {"code", "message", …}}`` or the
``{"error": "<code>", "message"}`` body of the ``/api/memory`` routes. The exception carries the
server's code, its message and the hint (what to do next): the server writes ``reason; what to
do``, and the client splits the two at the first ``"; "`` unless the body names a ``hint``. A
note (PEP 678) on the exception records the HTTP status, so an error from the server can be
told from one raised on this side.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, ParamSpec, TypeVar, overload
from urllib.parse import quote

import httpx

from palimpsest import canonical
from palimpsest.errors import Conflict, Forbidden, InvalidInput, NotFound, PalError, Unavailable

T = TypeVar("T")
P = ParamSpec("P")

DEFAULT_URL: Final = "http://127.0.0.1:8765"
ANSWERED: Final = "the server answered HTTP"  # the note on every refusal made from an answer
NO_BODY: Final[Any] = object()
Query = Mapping[str, str | int | bool | None]


def segment(value: str) -> str:
    """One path segment, percent-encoded (an id can never reach another route)."""
    return quote(value, safe="")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request and the type of its answer (``T`` is what the decoded body is)."""

    method: str
    path: str
    query: Query = field(default_factory=dict)
    body: Any = NO_BODY  # JSON-encoded (canonical) when given
    content: bytes | None = None  # raw bytes instead of JSON (file uploads)
    content_type: str | None = None
    idempotency_key: str | None = None
    raw: bool = False  # the answer is the body's bytes, not JSON

    def request(self) -> tuple[dict[str, Any], dict[str, str]]:
        """``(httpx keyword arguments, headers)`` for this call."""
        headers: dict[str, str] = {}
        kwargs: dict[str, Any] = {"params": {k: _query_value(v) for k, v in self.query.items()
                                             if v is not None}}
        if self.body is not NO_BODY:
            kwargs["content"] = canonical.encode(self.body)
            headers["Content-Type"] = "application/json"
        elif self.content is not None:
            kwargs["content"] = self.content
            headers["Content-Type"] = self.content_type or "application/octet-stream"
        if self.idempotency_key is not None:
            headers["Idempotency-Key"] = self.idempotency_key
        return kwargs, headers


def _query_value(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def body_of(**fields: Any) -> dict[str, Any]:
    """A JSON object of the fields that were given (``None`` means "not given")."""
    return {k: v for k, v in fields.items() if v is not None}


# --- answers and refusals -----------------------------------------------------------------------

_BY_STATUS: tuple[tuple[range, type[PalError]], ...] = (
    (range(401, 402), Forbidden),  # invalid_credential
    (range(403, 404), Forbidden),
    (range(404, 405), NotFound),
    (range(409, 410), Conflict),
    (range(400, 500), InvalidInput),
    (range(500, 600), Unavailable),
)


def refusal(status: int, content: bytes) -> PalError:
    """The error a non-2xx answer stands for, with the server's code, message and hint."""
    try:
        doc = canonical.decode(content, allow_floats=True) if content else None
    except PalError:
        doc = None
    code, message, hint = f"http-{status}", f"the server answered HTTP {status}", None
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):  # the UHP envelope
            code = str(err.get("code") or code)
            message = str(err.get("message") or message)
            hint = err.get("hint")
        elif isinstance(err, str):  # the /api/memory body
            code = err or code
            message = str(doc.get("message") or message)
            hint = doc.get("hint")
    if not isinstance(hint, str):
        message, _, rest = message.partition("; ")
        hint = rest or None
    cls = next((c for span, c in _BY_STATUS if status in span), PalError)
    error = cls(message, code=code, hint=hint)
    error.add_note(f"{ANSWERED} {status}")  # where it came from, for whoever shows it
    return error


def answer(response: httpx.Response, call: Call[T]) -> T:
    """The decoded answer of ``call``, or its refusal raised."""
    if response.status_code >= 300:
        raise refusal(response.status_code, response.content)
    if call.raw:
        return response.content  # type: ignore[return-value]  # T is bytes for raw calls
    if not response.content:
        return None  # type: ignore[return-value]
    decoded: T = canonical.decode(response.content, allow_floats=True)
    return decoded


def unreachable(url: str, exc: httpx.HTTPError) -> Unavailable:
    """The refusal for a server that did not answer at all."""
    reason = type(exc).__name__ if not str(exc) else str(exc)
    return Unavailable(f"cannot reach the server at {url} ({reason})", code="unreachable",
                       hint="start it with `pal serve`, or point --url / $PAL_URL at it")


class SyncTransport:
    """Sends calls over an :class:`httpx.Client`."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    def send(self, call: Call[T]) -> T:
        kwargs, headers = call.request()
        try:
            response = self.http.request(call.method, call.path, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            raise unreachable(str(self.http.base_url), exc) from exc
        return answer(response, call)


class AsyncTransport:
    """Sends calls over an :class:`httpx.AsyncClient`."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def send(self, call: Call[T]) -> T:
        kwargs, headers = call.request()
        try:
            response = await self.http.request(call.method, call.path, headers=headers,
                                               **kwargs)
        except httpx.HTTPError as exc:
            raise unreachable(str(self.http.base_url), exc) from exc
        return answer(response, call)


# --- typed methods from builders ----------------------------------------------------------------


class Sync:
    """Marker: the namespace answers directly."""


class Async:
    """Marker: the namespace answers with awaitables."""


M = TypeVar("M", Sync, Async)


class Namespace(Generic[M]):
    """A group of routes bound to one transport (``M`` says which kind)."""

    def __init__(self, transport: SyncTransport | AsyncTransport) -> None:
        self._transport = transport


class op(Generic[P, T]):
    """A route as a method: ``name = op(builder)`` on a :class:`Namespace`."""

    def __init__(self, build: Callable[P, Call[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> op[P, T]: ...
    @overload
    def __get__(self, obj: Namespace[Sync], owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: Namespace[Async], owner: type[Any]) -> Callable[P, Awaitable[T]]: ...

    def __get__(self, obj: Namespace[Any] | None, owner: type[Any]) -> Any:
        if obj is None:
            return self
        send = obj._transport.send
        build = self.build

        @functools.wraps(build)
        def method(*args: P.args, **kwargs: P.kwargs) -> Any:
            return send(build(*args, **kwargs))

        return method


__all__ = ["ANSWERED", "DEFAULT_URL", "NO_BODY", "Async", "AsyncTransport", "Call", "Namespace",
           "Sync", "SyncTransport", "answer", "body_of", "op", "refusal", "segment",
           "unreachable"]
