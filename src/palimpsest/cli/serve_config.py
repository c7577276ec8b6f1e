"""``pal serve --config FILE``: the server's settings from a TOML file, flags and environment.

Every key of the file is also a flag and an environment variable; the most explicit wins:
the command line, then the environment, then the file, then the default.

=================  ====================  ==================================================
key (file)         flag / environment    meaning
=================  ====================  ==================================================
``data_dir``       ``--data-dir``        the store (default ``$XDG_DATA_HOME/palimpsest/
                   ``PAL_DATA_DIR``      service``)
``host``           ``--host``            address to listen on (default ``127.0.0.1``)
                   ``PAL_HOST``
``port``           ``--port``            port, ``0`` picks a free one (default ``8765``)
                   ``PAL_PORT``
``allowed_hosts``  ``--allowed-host``    extra ``Host`` names to answer for (a list; in the
                   ``PAL_ALLOWED_HOSTS``  environment separated by spaces)
``log_level``      ``--log-level``       ``critical``, ``error``, ``warning`` (default) or
                   ``PAL_LOG_LEVEL``     ``info`` (one JSON access-log line per request)
``durability``     ``--durability``      ``normal`` (survives a crash of the process) or
                   ``PAL_DURABILITY``    ``full`` (an fsync per write: survives power loss)
``tracing``        ``--tracing``         ``none`` (default), ``console`` (spans as JSON lines
                   ``PAL_TRACING``       on stderr) or ``otlp``; needs the OpenTelemetry SDK
``database``       ``--database``        a ``postgresql://`` URL: the store on PostgreSQL
                   ``PAL_DATABASE_URL``  (keys and file bytes stay in the data directory);
                                         unset: the embedded SQLite store
``workers``        ``--workers``         server processes sharing the listening socket and
                   ``PAL_WORKERS``       the store (default ``1``: one process; at most 64)
``write_wait``     ``--write-wait``      seconds a write waits for other processes' writers
                   ``PAL_WRITE_WAIT``    before a 503 with ``Retry-After`` (default ``5``)
=================  ====================  ==================================================

An unknown key, a value of the wrong type or out of range is refused by name before the
server starts; nothing is guessed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from palimpsest.cli.datadir import default_data_dir
from palimpsest.errors import InvalidInput

LOG_LEVELS: Final = ("critical", "error", "warning", "info")
DURABILITY: Final = ("normal", "full")
TRACING: Final = ("none", "console", "otlp")
MAX_WORKERS: Final = 64
MAX_WRITE_WAIT: Final = 600.0
DEFAULTS: Final[dict[str, Any]] = {
    "host": "127.0.0.1", "port": 8765, "allowed_hosts": (), "log_level": "warning",
    "durability": "normal", "tracing": "none", "database": None, "workers": 1,
    "write_wait": 5.0,
}
_CHOICES: Final = {"log_level": LOG_LEVELS, "durability": DURABILITY, "tracing": TRACING}
KEYS: Final = ("data_dir", *DEFAULTS)


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """What ``pal serve`` runs with, every value resolved and checked."""

    data_dir: Path
    host: str
    port: int
    allowed_hosts: tuple[str, ...]
    log_level: str
    durability: str
    tracing: str
    workers: int
    write_wait: float
    database: str | None = None


def read(path: Path) -> dict[str, Any]:
    """The settings in a TOML file, checked key by key.

    Raises:
        InvalidInput: the file cannot be read or parsed, or holds an unknown key or a bad value.
    """
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"cannot read the configuration file {path}: {exc.strerror}",
                           code="invalid-config") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"the configuration file {path} is not valid TOML: {exc}",
                           code="invalid-config") from exc
    unknown = sorted(set(doc) - set(KEYS))
    if unknown:
        raise InvalidInput(f"{path}: unknown key(s) {', '.join(unknown)}", code="invalid-config",
                           hint=f"the keys are: {', '.join(KEYS)} (docs/operations.md)")
    return {key: _checked(path, key, value) for key, value in doc.items()}


def _checked(where: Path | str, key: str, value: Any) -> Any:
    def refuse(what: str) -> InvalidInput:
        return InvalidInput(f"{where}: {key} must be {what}", code="invalid-config")

    if key == "data_dir" and isinstance(value, Path):
        return value.expanduser()
    if key in ("data_dir", "host"):
        if not isinstance(value, str) or not value:
            raise refuse("a non-empty string")
        return Path(value).expanduser() if key == "data_dir" else value
    if key == "port":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
            raise refuse("an integer from 0 to 65535")
        return value
    if key == "database":
        if not isinstance(value, str) or not value.startswith(("postgresql://", "postgres://")):
            raise refuse("a postgresql:// connection URL")
        return value
    if key == "workers":
        if isinstance(value, bool) or not isinstance(value, int) \
                or not 1 <= value <= MAX_WORKERS:
            raise refuse(f"an integer from 1 to {MAX_WORKERS}")
        return value
    if key == "write_wait":
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0 < value <= MAX_WRITE_WAIT:
            raise refuse(f"a number of seconds above 0 and at most {MAX_WRITE_WAIT:g}")
        return float(value)
    if key == "allowed_hosts":
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v
                                                         for v in value):
            raise refuse("a list of host names")
        return tuple(v.lower() for v in value)
    choices = _CHOICES[key]
    if value not in choices:
        raise refuse("one of " + ", ".join(choices))
    return value


def resolve(given: Mapping[str, Any], config: Path | None) -> ServeSettings:
    """Settings from the flags and environment (``given``: ``None`` or ``()`` when not set),
    then the file, then the defaults.

    Raises:
        InvalidInput: a bad file or value (see :func:`read`).
    """
    from_file = read(config) if config is not None else {}
    out: dict[str, Any] = {}
    for key in KEYS:
        value = given.get(key)
        if value is None or value == ():
            value = from_file.get(key, DEFAULTS.get(key))
        else:
            value = _checked("the command line or environment", key, list(value)
                             if key == "allowed_hosts" else value)
        out[key] = value
    if out["data_dir"] is None:
        out["data_dir"] = default_data_dir()
    return ServeSettings(**{**out, "data_dir": Path(out["data_dir"]).expanduser()})


__all__ = ["DURABILITY", "KEYS", "LOG_LEVELS", "MAX_WORKERS", "TRACING", "ServeSettings", "read",
           "resolve"]
