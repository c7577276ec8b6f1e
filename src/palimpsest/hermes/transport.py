"""A small JSON-over-HTTP client for the UHP memory routes (standard library only).

It never follows redirects and never uses proxies from the environment, so the bearer credential
goes only to the configured origin. Response bodies are capped and parsed strictly. Every failure
is a :class:`TransportError` that says what happened (refused, no answer in time, an error
status, a malformed answer); the provider turns it into "no recalled memory".
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from .settings import Settings, decode_json


class TransportError(RuntimeError):
    """The server could not be reached or answered with an error."""

    def __init__(self, message: str, status: int = 0, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(  # noqa: PLR0917 - urllib's signature
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> None:
        return None  # a 3xx becomes an HTTPError; the credential never follows a redirect


def _opener(settings: Settings) -> urllib.request.OpenerDirector:
    handlers: list[Any] = [urllib.request.ProxyHandler({}), _NoRedirect()]
    if settings.url.startswith("https://"):
        context = ssl.create_default_context(cafile=settings.ca_file)
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers)


def memory_path(memory_id: str, suffix: str) -> str:
    """``/v1/memories/{id}/{suffix}`` with the id percent-encoded as one path segment."""
    return f"/v1/memories/{quote(memory_id, safe='')}/{suffix}"


def post_json(settings: Settings, path: str, body: dict[str, Any], timeout: float) -> Any:
    """POST a JSON body to ``settings.url + path`` with the bearer credential; return the JSON."""
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    request = urllib.request.Request(  # noqa: S310 - the URL is a validated http(s) origin
        settings.url + path,
        data=payload,
        method="POST",
        headers={
            "Authorization": f"Bearer {settings.token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "palimpsest-hermes/1",
        },
    )
    try:
        with _opener(settings).open(request, timeout=timeout) as response:
            data = response.read(settings.max_body_bytes + 1)
    except urllib.error.HTTPError as exc:
        code = ""
        try:
            detail = decode_json(exc.read(8192))
            if isinstance(detail, dict) and isinstance(detail.get("error"), dict):
                code = str(detail["error"].get("code", ""))
        except (ValueError, OSError):
            pass
        raise TransportError(f"the server answered {exc.code}", exc.code, code) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):  # socket.timeout is TimeoutError
            raise TransportError(
                f"the memory server did not answer within {timeout:g} s", code="timeout"
            ) from exc
        raise TransportError("the memory server is unreachable", code="unreachable") from exc
    if len(data) > settings.max_body_bytes:
        raise TransportError("the server's answer is larger than the configured maximum")
    try:
        return decode_json(data)
    except ValueError as exc:
        raise TransportError("the server's answer is not valid JSON") from exc


def recall(settings: Settings, query: str, limit: int) -> list[dict[str, Any]]:
    """Ask the server to recall from the configured memory; returns ``results`` (may be empty)."""
    body = {"query": query, "text": query, "limit": limit}
    answer = post_json(settings, memory_path(settings.memory_id, "recall"), body, settings.timeout)
    if not isinstance(answer, dict) or not isinstance(answer.get("results"), list):
        raise TransportError("the server's recall answer has no results list")
    return [item for item in answer["results"] if isinstance(item, dict)]


def instant(moment: datetime) -> str:
    """An RFC 3339 UTC instant to the second, as the service stores record times."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def observe(
    settings: Settings, text: str, attributes: dict[str, str], when: datetime
) -> None:
    """Send one user-authored episode, said at ``when``, to the configured memory (its time is
    what a question naming a date or "two weeks ago" is matched against)."""
    episode = {"content": text, "attributes": attributes, "time": {"valid_from": instant(when)}}
    body = {"episodes": [episode]}
    post_json(settings, memory_path(settings.memory_id, "observe"), body, settings.write_timeout)
