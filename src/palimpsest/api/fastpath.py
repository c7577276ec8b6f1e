"""The hottest route without FastAPI's per-request machinery: ``POST /v1/memories/{id}/records``.

Agents write far more often than they do anything else, and FastAPI's routing, dependency
solving and middleware cost more CPU per request than the write itself. The guard
(:mod:`.guard`) hands this handler every request it has already screened (host, credential,
size, strict JSON); the handler answers a well-formed ``remember`` itself and declines the rest.

It is the route :func:`palimpsest.api.routes_records.remember`, step for step: the same body
model (:class:`palimpsest.api.wire.Remember`, validated exactly as FastAPI validates a body),
the same path and header bounds as :mod:`.params`, the same facade call, the same response
(:func:`.runtime.remember_response`) and the same error envelope for a
refusal of the service (:func:`.errors.from_pal_error`). Anything the route would refuse for
its shape — a body the model rejects, a malformed ``Idempotency-Key``, an over-long id, a path
FastAPI would redirect — is declined and takes the ordinary FastAPI route, so each such error
keeps the exact envelope FastAPI's validation gives it. An unexpected exception propagates to
the app's server-error handler, as it would from the route.
"""

from __future__ import annotations

import json
import re
from typing import Final

from pydantic import ValidationError

from palimpsest.api import errors, wire
from palimpsest.api.guard import PRINCIPAL_KEY, FastPath, Receive, Scope, Send
from palimpsest.api.runtime import Runner, error_response, remember_response
from palimpsest.errors import PalError
from palimpsest.service.memories import MemoryService
from palimpsest.service.model import Caller

# What Starlette's `{memory_id}` matches, with params.MemoryId's bounds (1–200 characters).
_PATH: Final = re.compile(r"/v1/memories/([^/]{1,200})/records")
_KEY: Final = re.compile(r"[\x21-\x7e]{1,255}")  # params.IdempotencyKey


def remember_fast_path(svc: MemoryService, run: Runner) -> FastPath:
    """The fast handler of ``remember`` over ``svc``, calling it through ``run``."""

    async def handle(scope: Scope, headers: dict[str, str], body: bytes, receive: Receive,
                     send: Send) -> bool:
        if scope.get("method") != "POST" or scope.get("root_path"):
            return False
        match = _PATH.fullmatch(scope.get("path", ""))
        key = headers.get("idempotency-key")
        caller = scope.get(PRINCIPAL_KEY)
        if match is None or (key is not None and _KEY.fullmatch(key) is None) \
                or not isinstance(caller, Caller):
            return False
        try:
            model = wire.Remember.model_validate(json.loads(body), from_attributes=True)
        except (ValueError, ValidationError):  # FastAPI words this error; let it
            return False
        try:
            doc = await run.remember(svc, caller, match.group(1), wire.dump(model), key)
        except PalError as exc:
            response = error_response(errors.from_pal_error(exc))
        else:
            response = remember_response(doc)
        # What Starlette's Response sends: the same status, headers and body bytes.
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": response.raw_headers})
        await send({"type": "http.response.body", "body": response.body})
        return True

    return handle


__all__ = ["remember_fast_path"]
