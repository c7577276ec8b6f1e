# ruff: noqa: E501 - seed tables read best one case per line
"""Fuzz target ``hermes_connection``: the Hermes provider's managed connection file.

Input: the bytes of ``connection.json`` (written by ``pal hermes install``, re-read on every
request, so whatever is on disk when Hermes asks). ``@CRED@`` in the input becomes the path of a
valid 0600 credential file; ``@CRED_OPEN@`` (mode 0644), ``@CRED_BIG@`` (oversized),
``@CRED_BINARY@`` (not ASCII), ``@CRED_EMPTY@`` and ``@CRED_DIR@`` (a directory) name hostile
ones. The file is read by :func:`palimpsest.hermes.settings.load_managed` and, through
``PALIMPSEST_HERMES_CONNECTION_FILE``, by :func:`load_settings`.

Expected refusals: ``ConfigError`` (standard library only, no codes: the provider turns it into
"no recalled memory"). Anything else is a finding.

Oracle for an accepted file: its ``version`` is the integer 1. For the settings it gives (shared
with ``hermes_env``): the URL is an http(s) origin that
parses to itself, http only on loopback; the token is 1-4,096 visible ASCII characters; the
memory id is 1-256 characters, trimmed, UTF-8 encodable, with no control character, and becomes
one percent-encoded path segment; every number is inside its closed range.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.fuzz.harness import (
    Refused,
    Target,
    check,
    files,
    instrumented,
    refusals,
    scratch_dir,
    texts,
)

with instrumented():
    from palimpsest.hermes import settings as s
    from palimpsest.hermes.transport import memory_path

REFUSALS = refusals({s.ConfigError: None})
_TOKEN = re.compile(r"[\x21-\x7e]{1,4096}", re.ASCII)
_LOOPBACK = ("localhost", "127.0.0.1", "[::1]")


def check_settings(settings: Any) -> None:
    """Every promise of a validated :class:`Settings` (also used by ``hermes_env``)."""
    url = settings.url
    check(s.parse_url(url) == url, "the origin does not parse to itself")
    url.encode("utf-8")  # a lone surrogate here would break every request
    parts = urlsplit(url)
    check(parts.scheme in ("http", "https") and parts.path == "" and not parts.query,
          "not an origin")  # fmt: skip
    if parts.scheme == "http":
        check(parts.hostname is not None and s._is_loopback(parts.hostname), "http off loopback")
    check(_TOKEN.fullmatch(settings.token), "a token outside visible ASCII was accepted")
    memory = settings.memory_id
    check(0 < len(memory) <= s.MAX_ID_CHARS and memory == memory.strip(), "memory id bounds")
    check(not s._CONTROL_RE.search(memory), "a memory id with a control character was accepted")
    memory.encode("utf-8")
    path = memory_path(memory, "recall")
    check(path.count("/") == 4, "the memory id escaped its path segment")
    for key, (_default, low, high) in s.INT_BOUNDS.items():
        check(low <= getattr(settings, key.lower()) <= high, f"{key} out of range")
    for key, (_default, low, high) in s.FLOAT_BOUNDS.items():
        value = getattr(settings, key.lower())
        check(math.isfinite(value) and low <= value <= high, f"{key} out of range")


class _Files:
    def __init__(self) -> None:
        root = scratch_dir()
        self.plugin = root / "plugin"
        self.plugin.mkdir()
        self.connection = root / "connection.json"
        self.paths: dict[bytes, bytes] = {}
        for name, data, mode in (
            ("CRED", b"tok-0123456789\n", 0o600), ("CRED_OPEN", b"tok\n", 0o644),
            ("CRED_BIG", b"a" * 5000, 0o600), ("CRED_BINARY", b"\xff\xfe tok", 0o600),
            ("CRED_EMPTY", b"", 0o600),
        ):  # fmt: skip
            path = root / name.lower()
            path.write_bytes(data)
            os.chmod(path, mode)
            self.paths[f"@{name}@".encode()] = json.dumps(str(path))[1:-1].encode()
        (root / "dir").mkdir()
        self.paths[b"@CRED_DIR@"] = json.dumps(str(root / "dir"))[1:-1].encode()

    def write(self, data: bytes) -> Path:
        for token, path in self.paths.items():
            data = data.replace(token, path)
        self.connection.write_bytes(data)
        return self.connection


_FILES: _Files | None = None


def one_input(data: bytes) -> None:
    global _FILES  # noqa: PLW0603 - one set of credential files per process
    if _FILES is None:
        _FILES = _Files()
    path = _FILES.write(data)
    managed = REFUSALS.attempt(s.load_managed, path, {})
    env = {s.env_name("CONNECTION_FILE"): str(path)}
    loaded = REFUSALS.attempt(s.load_settings, env, _FILES.plugin)
    check(isinstance(managed, Refused) == isinstance(loaded, Refused), "two readers disagree")
    if not isinstance(managed, Refused):
        version = json.loads(path.read_bytes())["version"]
        check(type(version) is int and version == 1, f"a connection file of version {version!r}")
        check(managed == loaded, "two readers disagree")
        check(managed.mode == "managed" and not managed.auto_capture, "managed mode may write")
        check_settings(managed)


_OK = '{"version":1,"server_url":"http://127.0.0.1:8765","credential_file":"@CRED@","memory_id":"hmem_a"}'


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("fuzz/hermes_connection"),
        *texts("hermes_connection/literal", [
            _OK, _OK.replace("http://127.0.0.1:8765", "https://memory.example"),
            _OK.replace("127.0.0.1:8765", "[::1]:1"), _OK.replace("127.0.0.1", "evil.example"),
            _OK.replace("@CRED@", "@CRED_OPEN@"), _OK.replace("@CRED@", "@CRED_BIG@"),
            _OK.replace("@CRED@", "@CRED_BINARY@"), _OK.replace("@CRED@", "@CRED_EMPTY@"),
            _OK.replace("@CRED@", "@CRED_DIR@"), _OK.replace("@CRED@", "relative/cred"),
            _OK.replace("hmem_a", "\\ud800"), _OK.replace("hmem_a", "a/../b?c#d"),
            _OK.replace('"version":1', '"version":true'), _OK.replace('"version":1', '"version":1.0'),
            _OK.replace("}", ',"extra":1}'), _OK.replace('"memory_id"', '"memory_id":"x","memory_id"'),
            _OK.replace("http://127.0.0.1:8765", "http://user:pw@127.0.0.1"),
            _OK.replace("8765", "8765/path"), _OK.replace("8765", "99999"), "[" * 50_000, "[" * 5_000,
            _OK.replace("http://127.0.0.1:8765", "https://[::1"), "\ufeff" + _OK,
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="hermes_connection",
    one_input=one_input,
    refusals=REFUSALS,
    seeds=seeds,
    classes=("A1", "A2", "F25", "D17"),
    runs=3_000,
    summary="Hermes managed connection file and the credential file it names",
    dictionary=(b"@CRED@", b"@CRED_OPEN@", b"@CRED_BIG@", b"@CRED_BINARY@", b"@CRED_DIR@",
                b'"server_url":"', b'"memory_id":"', b"https://", b"http://[", b"localhost",
                b"\\ud800", b"%00", b"@"),
)

if __name__ == "__main__":
    TARGET.fuzz()
