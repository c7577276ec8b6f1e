"""The shared UHP error envelope and the mapping from the PalError tree to HTTP.

Every non-2xx response of the API is ``{"error": {"type", "code", "message", "param",
"detail"}}`` (uhp-memories.md §11). The service raises :class:`~palimpsest.errors.PalError`
subclasses whose ``code`` is, where one applies, one of the chapter's eight ``memory_*`` codes;
this module only translates them. An error of a class without a chapter code falls back to the
class's chapter code (``NotFound`` → ``memory_not_found`` and so on), so an unknown memory and a
forbidden one can never be told apart by their code.

Memory Git's routes under ``/api/memory`` answer the reference's body instead,
``{"error": "<code>", "message": "..."}`` (memory-git.md §6), every one of them — the guard's
and the router's refusals included — with codes in one style (kebab-case, :func:`lethe_code`).
:func:`for_path` picks the face by the request path, so each surface has one vocabulary.

This module does not decide *whether* something is an error: that is the service's job.
Messages are the service's own, which never echo author content.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from palimpsest.errors import Conflict, Forbidden, InvalidInput, NotFound, PalError, Unavailable


@dataclass(frozen=True, slots=True)
class Mapping:
    """How one error code is presented over HTTP."""

    status: int
    type: str


# The chapter's eight codes (§11), plus the few this server adds at its own edge.
CODES: dict[str, Mapping] = {
    "memory_not_found": Mapping(404, "invalid_request_error"),
    "memory_forbidden": Mapping(403, "permission_error"),
    "memory_record_not_found": Mapping(404, "invalid_request_error"),
    "memories_not_attached": Mapping(404, "invalid_request_error"),
    "memory_invalid": Mapping(422, "invalid_request_error"),
    "memory_unsupported": Mapping(422, "invalid_request_error"),
    "memory_busy": Mapping(409, "invalid_request_error"),
    "memory_unavailable": Mapping(503, "server_error"),
    # Shared-envelope code used by the reference gateway for a bad or missing credential.
    "invalid_credential": Mapping(401, "authentication_error"),
    # Vendor codes are vendor-prefixed (§11).
    "x.pal.request_too_large": Mapping(413, "invalid_request_error"),
    "x.pal.request_timeout": Mapping(408, "invalid_request_error"),
    "x.pal.route_not_found": Mapping(404, "invalid_request_error"),
    "x.pal.method_not_allowed": Mapping(405, "invalid_request_error"),
    "x.pal.host_not_allowed": Mapping(421, "invalid_request_error"),
    "x.pal.origin_not_allowed": Mapping(403, "permission_error"),
    "x.pal.unsupported_media_type": Mapping(415, "invalid_request_error"),
    "x.pal.conflict": Mapping(409, "invalid_request_error"),
    "x.pal.idempotency_mismatch": Mapping(409, "invalid_request_error"),
    "x.pal.internal": Mapping(500, "server_error"),
}

# Service codes outside the chapter, under their vendor-prefixed wire names.
_RENAMED = {
    "idempotency_mismatch": "x.pal.idempotency_mismatch",
    "cas_mismatch": "x.pal.conflict",
}

# Fallback by class when the service raised a code this edge does not know.
_BY_CLASS: tuple[tuple[type[PalError], str], ...] = (
    (NotFound, "memory_not_found"),
    (Forbidden, "memory_forbidden"),
    (InvalidInput, "memory_invalid"),
    (Conflict, "x.pal.conflict"),
    (Unavailable, "memory_unavailable"),
)


@dataclass(frozen=True, slots=True)
class ApiError:
    """One error response, ready to be rendered."""

    code: str
    message: str
    param: str | None = None
    detail: Any = None
    retry_after: int | None = None  # seconds; sent as Retry-After (a busy store's 503)

    @property
    def status(self) -> int:
        """The HTTP status for this code."""
        return CODES[self.code].status

    def on(self, path: str) -> tuple[int, dict[str, Any]]:
        """``(status, body)`` for a request to ``path``: Memory Git's face under
        ``/api/memory`` (an invalid request is its 400), the shared envelope elsewhere."""
        if not is_memory_git(path):
            return self.status, self.body()
        status = 400 if self.status == 422 else self.status
        return status, {"error": lethe_code(self.code), "message": self.message}

    def body(self) -> dict[str, Any]:
        """The envelope: ``{"error": {type, code, message, param, detail}}``."""
        return {
            "error": {
                "type": CODES[self.code].type,
                "code": self.code,
                "message": self.message,
                "param": self.param,
                "detail": self.detail,
            }
        }


def from_pal_error(exc: PalError) -> ApiError:
    """Translate a service error into its envelope, by code first and class second."""
    code = _RENAMED.get(exc.code, exc.code)
    if code not in CODES:
        code = _code_for_class(exc)
    message = exc.message if not exc.hint else f"{exc.message}; {exc.hint}"
    param = getattr(exc, "param", None)
    detail = getattr(exc, "detail", None)
    if code == "x.pal.conflict" and exc.code not in CODES and exc.code not in _RENAMED:
        # Keep the service's own conflict reason (idempotency mismatch, lost CAS) visible.
        detail = {"reason": exc.code}
    return ApiError(
        code=code,
        message=message,
        param=param if isinstance(param, str) else None,
        detail=detail if isinstance(detail, dict | list | str) else None,
        retry_after=retry_after_of(exc),
    )


def retry_after_of(exc: PalError) -> int | None:
    """The whole seconds after which ``exc``'s request may be sent again (a busy store), or
    ``None``."""
    value = getattr(exc, "retry_after", None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def headers_of(error: ApiError) -> dict[str, str]:
    """The response headers an error adds: ``WWW-Authenticate`` on 401, ``Retry-After`` when
    the condition is passing."""
    out: dict[str, str] = {}
    if error.status == 401:
        out["www-authenticate"] = "Bearer"
    if error.retry_after is not None:
        out["retry-after"] = str(error.retry_after)
    return out


MEMORY_GIT_PREFIX = "/api/memory"
# Codes whose kebab form would say less than a shorter name (the rest: drop the prefix).
_LETHE_NAMES = {"memory_record_not_found": "record-not-found"}
# Memory Git's statuses by error class (memory-git.md §6).
_LETHE_STATUS: tuple[tuple[type[PalError], int], ...] = (
    (InvalidInput, 400),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (Unavailable, 503),
)


def is_memory_git(path: str) -> bool:
    """Whether ``path`` is one of Memory Git's routes (their own error face)."""
    return path == MEMORY_GIT_PREFIX or path.startswith(MEMORY_GIT_PREFIX + "/")


def lethe_code(code: str) -> str:
    """The one code style of ``/api/memory``: ``memory_not_found`` → ``not-found``,
    ``cas_mismatch`` → ``cas-mismatch``, ``x.pal.route_not_found`` → ``route-not-found``."""
    name = _LETHE_NAMES.get(code) or code.removeprefix("x.pal.").removeprefix("memory_")
    return name.replace("_", "-").replace(".", "-")


def lethe_error(exc: PalError) -> tuple[int, dict[str, Any]]:
    """``(status, {"error", "message"})`` of a service error on a Memory Git route."""
    if isinstance(exc, Forbidden) and exc.code == "invalid_credential":
        status = 401
    else:
        status = next((s for cls, s in _LETHE_STATUS if isinstance(exc, cls)), 500)
    message = f"{exc.message}; {exc.hint}" if exc.hint else exc.message
    return status, {"error": lethe_code(exc.code), "message": message}


def _code_for_class(exc: PalError) -> str:
    for cls, code in _BY_CLASS:
        if isinstance(exc, cls):
            return code
    return "x.pal.internal"


def error_schema() -> dict[str, Any]:
    """The OpenAPI schema of the envelope (kept beside the code that emits it)."""
    return {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["type", "code", "message"],
                "properties": {
                    "type": {
                        "type": "string",
                        "enum": sorted({m.type for m in CODES.values()}),
                    },
                    "code": {"type": "string", "enum": sorted(CODES)},
                    "message": {"type": "string"},
                    "param": {"type": ["string", "null"]},
                    "detail": {},
                },
            }
        },
    }


__all__ = ["CODES", "MEMORY_GIT_PREFIX", "ApiError", "Mapping", "error_schema", "from_pal_error",
           "headers_of", "is_memory_git", "lethe_code", "lethe_error", "retry_after_of"]
