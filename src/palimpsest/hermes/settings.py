"""Configuration of the Hermes provider: a managed connection file or explicit environment.

Standard library only: this module is copied into ``$HERMES_HOME/plugins/palimpsest/`` and runs
inside Hermes' own environment. Every value is validated against a closed range; anything out of
range is a :class:`ConfigError`, which the provider turns into "no recalled memory".

Managed mode (written by ``pal hermes install``) reads a JSON connection file naming the server
origin, the path of a 0600 credential file and the memory id; it is re-read on every request so a
rotated credential or a removed installation takes effect without restarting Hermes. Direct mode
uses explicit ``PALIMPSEST_HERMES_*`` environment variables. This module does no network I/O.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

PREFIX = "PALIMPSEST_HERMES_"
DEFAULT_URL = "http://127.0.0.1:8765"
CONNECTION_FILE_NAME = "connection.json"
CONNECTION_VERSION = 1

# name -> (default, minimum, maximum)
INT_BOUNDS: dict[str, tuple[int, int, int]] = {
    "LIMIT": (5, 1, 20),
    "MAX_CHARS": (4000, 256, 16000),
    "MAX_BODY_BYTES": (262144, 1024, 1048576),
}
FLOAT_BOUNDS: dict[str, tuple[float, float, float]] = {
    "TIMEOUT": (5.0, 0.1, 30.0),
    "WRITE_TIMEOUT": (5.0, 0.1, 120.0),
    # How long prefetch may wait for a recall when no warmed result is ready (the first turn
    # of a session, after a reset): bounded well below Hermes' own 8 s prefetch timeout.
    "PREFETCH_WAIT": (0.3, 0.0, 5.0),
}
MAX_ID_CHARS = 256
MAX_TOKEN_CHARS = 4096
MAX_CONNECTION_BYTES = 16384
_TOKEN_RE = re.compile(r"[\x21-\x7e]+")
_INT_RE = re.compile(r"[0-9]{1,9}")
_FLOAT_RE = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6})?")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class ConfigError(ValueError):
    """The provider's configuration is missing or out of range; recall is off until fixed."""


@dataclass(frozen=True, slots=True)
class Settings:
    """One validated configuration snapshot (re-read on every request in managed mode)."""

    mode: str  # "managed" | "direct"
    url: str  # origin only: scheme://host[:port]
    token: str
    memory_id: str
    limit: int
    max_chars: int
    max_body_bytes: int
    timeout: float
    write_timeout: float
    prefetch_wait: float
    auto_recall: bool
    auto_capture: bool
    ca_file: str | None


def env_name(key: str) -> str:
    """The environment variable of a setting key: ``LIMIT`` → ``PALIMPSEST_HERMES_LIMIT``."""
    return PREFIX + key


def parse_int(key: str, raw: str | None) -> int:
    """Parse an integer setting and check its closed range; ``None`` or blank gives the default."""
    default, low, high = INT_BOUNDS[key]
    if raw is None or not raw.strip():
        return default
    text = raw.strip()
    if not _INT_RE.fullmatch(text):
        raise ConfigError(f"{env_name(key)} must be an integer from {low} to {high}")
    value = int(text)
    if not low <= value <= high:
        raise ConfigError(f"{env_name(key)} must be an integer from {low} to {high}")
    return value


def parse_float(key: str, raw: str | None, default: float | None = None) -> float:
    """Parse a finite number of seconds and check its closed range."""
    base, low, high = FLOAT_BOUNDS[key]
    if raw is None or not raw.strip():
        return base if default is None else default
    text = raw.strip()
    if not _FLOAT_RE.fullmatch(text):
        raise ConfigError(f"{env_name(key)} must be a number of seconds from {low} to {high}")
    value = float(text)
    if not math.isfinite(value) or not low <= value <= high:
        raise ConfigError(f"{env_name(key)} must be a number of seconds from {low} to {high}")
    return value


def parse_bool(key: str, raw: str | None, default: bool) -> bool:
    """Parse ``true`` or ``false`` (nothing else is accepted)."""
    if raw is None or not raw.strip():
        return default
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{env_name(key)} must be true or false")
    return text == "true"


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _unicode(text: str) -> bool:
    """False for a lone surrogate (undecodable environment bytes, a JSON "\\ud800" escape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_url(raw: str | None) -> str:
    """Validate a server origin: http only on loopback, https elsewhere, no path or credentials."""
    text = (raw or "").strip() or DEFAULT_URL
    if _CONTROL_RE.search(text) or " " in text or not _unicode(text):
        raise ConfigError(f"{env_name('URL')} must be an origin such as {DEFAULT_URL}")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{env_name('URL')} is not a valid URL") from exc
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host:
        raise ConfigError(f"{env_name('URL')} must be an http:// or https:// origin")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(f"{env_name('URL')} must not carry credentials")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"{env_name('URL')} must be an origin only (no path, query or fragment)")
    if parts.scheme == "http" and not _is_loopback(host):
        raise ConfigError(f"{env_name('URL')} must use https unless the server is on loopback")
    shown = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{shown}" + (f":{port}" if port is not None else "")


def parse_memory_id(raw: str | None, source: str) -> str:
    """A memory id: non-blank, at most 256 characters, no control characters."""
    text = (raw or "").strip()
    if not text:
        raise ConfigError(f"{source} is required: the memory to recall from")
    if len(text) > MAX_ID_CHARS or _CONTROL_RE.search(text) or not _unicode(text):
        raise ConfigError(f"{source} must be at most {MAX_ID_CHARS} printable characters")
    return text


def parse_token(raw: str | None, source: str) -> str:
    """A bearer credential: 1–4096 visible ASCII characters (no spaces, no line breaks)."""
    text = (raw or "").strip()
    if not text:
        raise ConfigError(f"{source} is required: the agent's credential")
    if len(text) > MAX_TOKEN_CHARS or not _TOKEN_RE.fullmatch(text):
        raise ConfigError(f"{source} must be 1-{MAX_TOKEN_CHARS} visible ASCII characters")
    return text


def read_credential_file(path_text: str) -> str:
    """Read a credential file that must be a regular file readable by its owner only (0600)."""
    if _CONTROL_RE.search(path_text):  # a NUL cannot even be stat()ed; none may reach a message
        raise ConfigError("the credential file path must not hold control characters")
    try:
        os.fsencode(path_text)  # a JSON "\\ud800" is no file name (undecodable bytes from the
    except UnicodeEncodeError as exc:  # environment, "\\udcff", still are)
        raise ConfigError("the credential file path is not a valid file name") from exc
    path = Path(path_text)
    if not path.is_absolute():
        raise ConfigError("the credential file path must be absolute")
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(f"the credential file {path} is missing") from exc
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"the credential file {path} is not a regular file")
    if info.st_mode & 0o077:
        raise ConfigError(f"the credential file {path} must be mode 0600 (chmod 600 {path})")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise ConfigError(f"the credential file {path} belongs to another user")
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_TOKEN_CHARS + 2)
        text = data.decode("ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the credential file {path} is unreadable") from exc
    return parse_token(text, f"the credential file {path}")


def _strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_json(data: bytes) -> Any:
    """Parse JSON strictly: UTF-8, no duplicate keys, no NaN or Infinity (ValueError otherwise).

    One parser for the connection file and the server's responses, standard library only.
    """
    try:
        return json.loads(
            data.decode("utf-8"), object_pairs_hook=_strict_object, parse_constant=_reject_constant
        )
    except RecursionError as exc:  # deep nesting is bad input, like every other parse failure
        raise ValueError("JSON nests too deeply") from exc


def load_json_file(path: Path, limit: int) -> dict[str, Any]:
    """Read a small JSON object strictly (duplicate keys, NaN and oversize refused)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}") from exc
    if len(data) > limit:
        raise ConfigError(f"{path} is larger than {limit} bytes")
    try:
        value = decode_json(data)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ConfigError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ConfigError(f"{path} must hold a JSON object")
    return value


def connection_path(env: Mapping[str, str], plugin_dir: Path) -> Path | None:
    """The managed connection file: the explicit variable, else a sibling ``connection.json``."""
    explicit = env.get(env_name("CONNECTION_FILE"), "").strip()
    if explicit:
        if _CONTROL_RE.search(explicit):
            raise ConfigError(f"{env_name('CONNECTION_FILE')} must not hold control characters")
        path = Path(explicit)
        if not path.is_absolute():
            raise ConfigError(f"{env_name('CONNECTION_FILE')} must be an absolute path")
        return path
    sibling = plugin_dir / CONNECTION_FILE_NAME
    return sibling if sibling.exists() else None


def _tuning(env: Mapping[str, str]) -> dict[str, Any]:
    timeout = parse_float("TIMEOUT", env.get(env_name("TIMEOUT")))
    return {
        "limit": parse_int("LIMIT", env.get(env_name("LIMIT"))),
        "max_chars": parse_int("MAX_CHARS", env.get(env_name("MAX_CHARS"))),
        "max_body_bytes": parse_int("MAX_BODY_BYTES", env.get(env_name("MAX_BODY_BYTES"))),
        "timeout": timeout,
        "write_timeout": parse_float(
            "WRITE_TIMEOUT", env.get(env_name("WRITE_TIMEOUT")), default=timeout
        ),
        "prefetch_wait": parse_float("PREFETCH_WAIT", env.get(env_name("PREFETCH_WAIT"))),
        "auto_recall": parse_bool("AUTO_RECALL", env.get(env_name("AUTO_RECALL")), True),
    }


def _ca_file(env: Mapping[str, str]) -> str | None:
    raw = env.get(env_name("CA_FILE"), "").strip()
    if not raw:
        return None
    if not Path(raw).is_absolute() or not Path(raw).is_file():
        raise ConfigError(f"{env_name('CA_FILE')} must be the absolute path of a PEM file")
    return raw


def load_managed(path: Path, env: Mapping[str, str]) -> Settings:
    """Read a managed connection file and the credential file it names."""
    doc = load_json_file(path, MAX_CONNECTION_BYTES)
    allowed = {"version", "server_url", "credential_file", "memory_id"}
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r} in the connection file {path}")
    version = doc.get("version")
    if type(version) is not int or version != CONNECTION_VERSION:  # not true, not 1.0
        raise ConfigError(f"the connection file {path} must have version {CONNECTION_VERSION}")
    for key in ("server_url", "credential_file", "memory_id"):
        if not isinstance(doc.get(key), str):
            raise ConfigError(f"the connection file {path} must name {key} as a string")
    return Settings(
        mode="managed",
        url=parse_url(doc["server_url"]),
        token=read_credential_file(doc["credential_file"]),
        memory_id=parse_memory_id(doc["memory_id"], "memory_id in the connection file"),
        auto_capture=False,  # managed installations are read-only by design
        ca_file=_ca_file(env),
        **_tuning(env),
    )


def load_direct(env: Mapping[str, str]) -> Settings:
    """Read explicit ``PALIMPSEST_HERMES_*`` variables (operator-managed direct mode)."""
    token_file = env.get(env_name("TOKEN_FILE"), "").strip()
    if token_file:
        token = read_credential_file(token_file)
    else:
        token = parse_token(env.get(env_name("TOKEN")), env_name("TOKEN"))
    return Settings(
        mode="direct",
        url=parse_url(env.get(env_name("URL"))),
        token=token,
        memory_id=parse_memory_id(env.get(env_name("MEMORY")), env_name("MEMORY")),
        auto_capture=parse_bool("AUTO_CAPTURE", env.get(env_name("AUTO_CAPTURE")), False),
        ca_file=_ca_file(env),
        **_tuning(env),
    )


def load_settings(env: Mapping[str, str], plugin_dir: Path) -> Settings:
    """Managed mode when a connection file exists, else direct mode; raises :class:`ConfigError`."""
    path = connection_path(env, plugin_dir)
    if path is not None:
        return load_managed(path, env)
    return load_direct(env)


def configured(env: Mapping[str, str], plugin_dir: Path) -> bool:
    """Cheap check: is there a connection file or a direct memory set? (Whether that
    configuration works is :func:`load_settings`'s question.)"""
    try:
        path = connection_path(env, plugin_dir)
    except ConfigError:
        return False
    if path is not None:
        return True
    return bool(env.get(env_name("MEMORY"), "").strip())
