"""Pages of the review desk: templates, inert author text and the security headers.

Every page is rendered on the server from the templates shipped in this package. Author text
is made inert twice over, whatever a template does with it:

1. the environment's ``finalize`` passes every string through :func:`palimpsest.text.safe_text`
   (controls become U+FFFD, bidi overrides, zero-width and other format characters become
   visible ``<U+XXXX>``, as the CLI shows them), and
2. autoescaping turns ``<``, ``>``, ``&`` and quotes into entities.

Nothing is rendered as HTML or Markdown: the templates never use ``|safe`` and no value is
marked safe (a test checks the templates). Links are built only from server ids with
:func:`href`, percent-encoded under ``/ui/``, so no author string becomes a URL scheme.

Every response carries a Content-Security-Policy without inline script or style (there is no
script at all), ``frame-ancestors 'none'``, ``nosniff``, no referrer to other origins and no
caching.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from palimpsest.text import safe_line, safe_text

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=()",
}
# A file part downloaded from the desk: never rendered, never scripted, never framed.
FILE_CSP = "default-src 'none'; sandbox; frame-ancestors 'none'"
PREFIX = "/ui"


def href(*parts: str, **query: Any) -> str:
    """A desk URL from path segments (each percent-encoded) and query parameters."""
    path = PREFIX + "/" + "/".join(quote(str(p), safe="") for p in parts)
    pairs = {k: v for k, v in query.items() if v not in (None, "")}
    return path + ("?" + urlencode(pairs) if pairs else "")


def _finalize(value: Any) -> Any:
    # Markup here is a macro's output, already built from finalized and escaped values.
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    return safe_text(value)


def _when(value: Any) -> str:
    """Epoch milliseconds or an RFC 3339 string as ``YYYY-MM-DD HH:MM UTC``."""
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int):
        return datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = str(value)
    return text[:16].replace("T", " ") + " UTC" if len(text) >= 16 else text


def _short(value: Any, size: int = 12) -> str:
    text = str(value or "")
    return text if len(text) <= size + 1 else text[:size] + "…"


def _json(value: Any) -> str:
    """A value as indented JSON text (a plain string: escaped like any other)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def environment() -> Environment:
    """The desk's template environment (autoescaped, inert strings)."""
    env = Environment(
        loader=PackageLoader("palimpsest.ui", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["href"] = href
    env.filters["line"] = safe_line
    env.filters["when"] = _when
    env.filters["short"] = _short
    env.filters["json"] = _json
    return env


__all__ = ["CSP", "FILE_CSP", "PREFIX", "SECURITY_HEADERS", "environment", "href"]
