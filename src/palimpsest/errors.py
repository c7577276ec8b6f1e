"""One error tree for every face of Palimpsest.

Every refusal is a :class:`PalError`. It carries a stable machine ``code`` (a short kebab-case
reason such as ``non-canonical`` or ``weak-key``), a ``message`` saying what went wrong, and an
optional ``hint`` saying what to do next. The tree is split by who is at fault:

- :class:`InvalidInput`  bad or hostile data, or a malformed request (the caller must change it);
- :class:`NotFound`      the named thing does not exist (or may not be seen: the two look alike);
- :class:`Forbidden`     the caller may not do this;
- :class:`Conflict`      the world moved underneath the caller (a lost compare-and-swap, an
                         idempotency key reused for another request); reload and retry;
- :class:`Unavailable`   the environment failed (Git, disk, a remote, a database).

Edges map the tree to their own vocabulary: the CLI prints ``pal: <message>`` and exits 1,
the HTTP API maps each class to a status and an error envelope, MCP returns a tool error.
Errors never echo author payloads: messages name fields and limits, not content.
"""

from __future__ import annotations


class PalError(Exception):
    """Base of every error Palimpsest raises on purpose."""

    default_code = "error"

    def __init__(self, message: str, *, code: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message

    def diagnostics(self) -> str:
        """The one-line text shown to a person: the reason, then what to do next."""
        return str(self)


class InvalidInput(PalError):
    """Bad, malformed, oversized or hostile input; nothing was written."""

    default_code = "invalid-input"


class NotFound(PalError):
    """The named object does not exist or may not be seen by the caller."""

    default_code = "not-found"


class Forbidden(PalError):
    """The caller is known but may not perform this action."""

    default_code = "forbidden"


class Conflict(PalError):
    """A concurrent change or a reused idempotency key; reload and retry."""

    default_code = "conflict"


class Unavailable(PalError):
    """The environment (Git, storage, network, a remote) could not serve the request.

    ``retry_after`` (whole seconds) says the condition is passing — the store was busy with
    other writers past its bounded wait — and when to try again (HTTP ``Retry-After``)."""

    default_code = "unavailable"

    def __init__(self, message: str, *, code: str | None = None, hint: str | None = None,
                 retry_after: int | None = None) -> None:
        super().__init__(message, code=code, hint=hint)
        self.retry_after = retry_after


__all__ = ["Conflict", "Forbidden", "InvalidInput", "NotFound", "PalError", "Unavailable"]
