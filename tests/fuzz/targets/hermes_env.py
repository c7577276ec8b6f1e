"""Fuzz target ``hermes_env``: the Hermes provider's ``PALIMPSEST_HERMES_*`` environment.

Input: lines ``KEY=VALUE`` read as ``os.environ`` reads them (UTF-8 with ``surrogateescape``;
a line with NUL is dropped, as no environment can hold one);
each ``KEY`` is a setting name (``URL``, ``TOKEN``, ``TOKEN_FILE``, ``MEMORY``, ``LIMIT``,
``MAX_CHARS``, ``MAX_BODY_BYTES``, ``TIMEOUT``, ``WRITE_TIMEOUT``, ``AUTO_RECALL``,
``AUTO_CAPTURE``, ``CA_FILE``, ``CONNECTION_FILE``) and gets the ``PALIMPSEST_HERMES_`` prefix.
The credential placeholders of ``hermes_connection`` work in values, and ``@CONNECTION@`` names a
valid connection file. The environment goes to :func:`palimpsest.hermes.settings.load_settings`
(direct mode, or managed mode when it names a connection file) and :func:`configured`.

Expected refusals: ``ConfigError``. Anything else is a finding (``configured`` must never raise).

Oracle: the accepted settings keep every promise ``hermes_connection`` checks; direct mode
takes its memory and token from the environment; ``configured`` is true whenever settings load.
"""

from __future__ import annotations

import json

from tests.fuzz.harness import (
    NEVER_RAISES,
    Refused,
    Target,
    check,
    files,
    instrumented,
    refusals,
    texts,
)

with instrumented():
    from palimpsest.hermes import settings as s
    from tests.fuzz.targets.hermes_connection import _Files, check_settings

REFUSALS = refusals({s.ConfigError: None})
_STATE: dict[str, object] = {}


def _files() -> tuple[_Files, bytes]:
    if not _STATE:
        made = _Files()
        connection = made.connection.with_name("valid-connection.json")
        connection.write_bytes(json.dumps({
            "version": 1, "server_url": "https://memory.example",
            "credential_file": json.loads(b'"' + made.paths[b"@CRED@"] + b'"'),
            "memory_id": "hmem_env",
        }).encode())  # fmt: skip
        _STATE["files"], _STATE["connection"] = made, json.dumps(str(connection))[1:-1].encode()
    return _STATE["files"], _STATE["connection"]  # type: ignore[return-value]


def one_input(data: bytes) -> None:
    made, connection = _files()
    for token, path in made.paths.items():
        data = data.replace(token, path)
    data = data.replace(b"@CONNECTION@", connection)
    env: dict[str, str] = {}
    for line in data.split(b"\n"):
        key, eq, value = line.partition(b"=")
        if eq and b"\x00" not in line:  # a process environment cannot hold NUL
            env[s.env_name(key.decode("utf-8", "surrogateescape"))] = value.decode(
                "utf-8", "surrogateescape"
            )
    settings = REFUSALS.attempt(s.load_settings, env, made.plugin)
    ready = NEVER_RAISES.attempt(s.configured, env, made.plugin)
    if isinstance(settings, Refused):
        return
    check(ready is True, "settings load but configured() says no")
    check_settings(settings)
    if settings.mode == "direct":
        given = env.get(s.env_name("MEMORY"), "").strip()
        check(settings.memory_id == given, "the memory id does not come from the environment")


def seeds() -> list[tuple[str, bytes]]:
    return [
        *files("fuzz/hermes_env"),
        *texts("hermes_env/literal", [
            "MEMORY=hmem_a\nTOKEN=tok", "MEMORY=hmem_a\nTOKEN_FILE=@CRED@\nURL=https://m.example:8443",
            "MEMORY=hmem_a\nTOKEN=tok\nLIMIT=20\nMAX_CHARS=256\nMAX_BODY_BYTES=1048576\nTIMEOUT=0.1",
            "MEMORY=hmem_a\nTOKEN=tok\nWRITE_TIMEOUT=120\nAUTO_RECALL=false\nAUTO_CAPTURE=TRUE",
            "MEMORY=hmem_a\nTOKEN=tok\nCA_FILE=@CRED@", "CONNECTION_FILE=@CONNECTION@",
            "CONNECTION_FILE=@CONNECTION@\nLIMIT=0", "CONNECTION_FILE=relative.json",
            "MEMORY=hmem_\udcff\nTOKEN=tok", "MEMORY=hmem_a\nTOKEN=t\udcffk", "MEMORY=a\nTOKEN=tok\nURL=http://[::1]:80",
            "MEMORY=a\nTOKEN=tok\nURL=http://0x7f.1", "MEMORY=a\nTOKEN=tok\nURL=https://h\udcff.example",
            "MEMORY=a\nTOKEN=tok\nTIMEOUT=1e1", "MEMORY=a\nTOKEN=tok\nLIMIT=\u0661\u0662",
            "MEMORY=a\nTOKEN_FILE=@CRED_OPEN@",
        ]),
    ]  # fmt: skip


TARGET = Target(
    name="hermes_env",
    one_input=one_input,
    refusals=REFUSALS,
    seeds=seeds,
    classes=("A2", "F25", "D17"),
    runs=20_000,
    max_len=1024,
    summary="Hermes PALIMPSEST_HERMES_* environment (direct mode; managed via CONNECTION_FILE)",
    dictionary=(b"\nURL=", b"\nTOKEN=", b"\nTOKEN_FILE=", b"\nMEMORY=", b"\nLIMIT=", b"\nTIMEOUT=",
                b"\nWRITE_TIMEOUT=", b"\nAUTO_CAPTURE=", b"\nCA_FILE=", b"\nCONNECTION_FILE=",
                b"@CONNECTION@", b"@CRED@", b"https://", b"http://localhost", b"[::1]", b"\xff"),
)

if __name__ == "__main__":
    TARGET.fuzz()
