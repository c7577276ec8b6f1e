"""An independent memory-git-merge/v2 envelope builder, written from memory-git.md §11 only.

It deliberately shares no code with ``palimpsest.service.memorygit.mergeauth``: the HMAC input is
``json.dumps`` of a dict with the fourteen keys in the reference's order, compact separators,
``ensure_ascii=False`` (Go's canonical.JSON with HTML escaping off), U+2028/U+2029 escaped.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

ORDER = (
    "version", "project_id", "ref_name", "expected_head", "new_head", "proposal_id",
    "proposal_digest", "reviewer_principal", "merger_principal", "strategy", "issued_at",
    "expires_at", "nonce", "key_id",
)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def envelope(**fields: str) -> dict[str, str]:
    missing = [k for k in ORDER if k not in fields]
    assert not missing, missing
    return {k: fields[k] for k in ORDER}


def canonical_bytes(env: dict[str, str]) -> bytes:
    text = json.dumps(env, separators=(",", ":"), ensure_ascii=False)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode("utf-8")


def signature(env: dict[str, str], key: bytes) -> str:
    return hmac.new(key, canonical_bytes(env), hashlib.sha256).hexdigest()


def wire(env: dict[str, str], sig: str) -> str:
    return json.dumps({"envelope": env, "signature": sig}, separators=(",", ":"))


def times(now: datetime, ttl: timedelta = timedelta(minutes=10)) -> tuple[str, str]:
    return rfc3339(now), rfc3339(now + ttl)
