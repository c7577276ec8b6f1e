"""Every configuration bound of the Hermes provider, accepted at the edge and refused beyond it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from palimpsest.hermes import settings as s
from palimpsest.hermes.settings import ConfigError


def _direct(**extra: str) -> dict[str, str]:
    env = {"PALIMPSEST_HERMES_MEMORY": "hmem_a", "PALIMPSEST_HERMES_TOKEN": "tok"}
    env.update({f"PALIMPSEST_HERMES_{k}": v for k, v in extra.items()})
    return env


@pytest.mark.parametrize(
    ("key", "low", "high", "default"),
    [
        ("LIMIT", 1, 20, 5),
        ("MAX_CHARS", 256, 16000, 4000),
        ("MAX_BODY_BYTES", 1024, 1048576, 262144),
    ],
)
def test_integer_bounds(key: str, low: int, high: int, default: int, tmp_path: Path) -> None:
    field = key.lower()
    assert getattr(s.load_direct(_direct()), field) == default
    assert getattr(s.load_direct(_direct(**{key: str(low)})), field) == low
    assert getattr(s.load_direct(_direct(**{key: str(high)})), field) == high
    for bad in (str(low - 1), str(high + 1), "1.5", "-1", "ten", "0x10", "1e3", "9" * 5000):
        with pytest.raises(ConfigError, match=f"PALIMPSEST_HERMES_{key}"):
            s.load_direct(_direct(**{key: bad}))


@pytest.mark.parametrize(
    ("key", "low", "high"), [("TIMEOUT", 0.1, 30.0), ("WRITE_TIMEOUT", 0.1, 120.0)]
)
def test_timeout_bounds(key: str, low: float, high: float) -> None:
    field = key.lower()
    assert getattr(s.load_direct(_direct(**{key: str(low)})), field) == low
    assert getattr(s.load_direct(_direct(**{key: str(high)})), field) == high
    for bad in ("0.09", "0", str(high + 0.1), "nan", "inf", "-1", "1e1", "", " "):
        if not bad.strip():
            continue  # blank means default, tested below
        with pytest.raises(ConfigError, match=f"PALIMPSEST_HERMES_{key}"):
            s.load_direct(_direct(**{key: bad}))


def test_timeout_defaults_and_write_timeout_follows_read_timeout() -> None:
    base = s.load_direct(_direct())
    assert (base.timeout, base.write_timeout) == (5.0, 5.0)
    follows = s.load_direct(_direct(TIMEOUT="2.5"))
    assert (follows.timeout, follows.write_timeout) == (2.5, 2.5)
    own = s.load_direct(_direct(TIMEOUT="2.5", WRITE_TIMEOUT="60"))
    assert own.write_timeout == 60.0


def test_prefetch_wait_is_short_by_default_and_bounded() -> None:
    assert s.load_direct(_direct()).prefetch_wait == 0.3
    assert s.load_direct(_direct(PREFETCH_WAIT="0")).prefetch_wait == 0.0  # never wait
    assert s.load_direct(_direct(PREFETCH_WAIT="5")).prefetch_wait == 5.0
    for bad in ("5.1", "-0.1", "nan", "1e0", "soon"):
        with pytest.raises(ConfigError, match="PALIMPSEST_HERMES_PREFETCH_WAIT"):
            s.load_direct(_direct(PREFETCH_WAIT=bad))


@pytest.mark.parametrize("key", ["AUTO_RECALL", "AUTO_CAPTURE"])
def test_boolean_settings(key: str) -> None:
    field = key.lower()
    assert getattr(s.load_direct(_direct(**{key: "true"})), field) is True
    assert getattr(s.load_direct(_direct(**{key: "FALSE"})), field) is False
    for bad in ("1", "yes", "on", "truee"):
        with pytest.raises(ConfigError, match=key):
            s.load_direct(_direct(**{key: bad}))


def test_defaults_are_read_only_with_recall_on() -> None:
    config = s.load_direct(_direct())
    assert config.mode == "direct"
    assert config.auto_recall is True
    assert config.auto_capture is False
    assert config.url == s.DEFAULT_URL


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
        ("http://localhost:9000/", "http://localhost:9000"),
        ("http://[::1]:9000", "http://[::1]:9000"),
        ("https://memory.example.org", "https://memory.example.org"),
        ("https://memory.example.org:8443", "https://memory.example.org:8443"),
    ],
)
def test_url_origins_accepted(raw: str, expected: str) -> None:
    assert s.load_direct(_direct(URL=raw)).url == expected


@pytest.mark.parametrize(
    "raw",
    [
        "http://memory.example.org",  # plain http off loopback
        "http://10.0.0.5:9000",
        "ftp://127.0.0.1",
        "http://user:pw@127.0.0.1:9000",
        "http://127.0.0.1:9000/v1",
        "http://127.0.0.1:9000?x=1",
        "http://127.0.0.1:9000#f",
        "http://127.0.0.1:99999",
        "127.0.0.1:9000",
        "http://127.0.0.1:9000\r\nX: y",
        "https://memory.\udcffexample",  # undecodable environment bytes (os.environ)
    ],
)
def test_url_refused(raw: str) -> None:
    with pytest.raises(ConfigError, match="PALIMPSEST_HERMES_URL"):
        s.load_direct(_direct(URL=raw))


def test_memory_and_token_bounds() -> None:
    assert s.load_direct(_direct(MEMORY="m" * 256)).memory_id == "m" * 256
    # a lone surrogate (found by the hermes_connection fuzz target) broke every request later
    for bad_memory in ("", "  ", "m" * 257, "hmem\n_a", "hmem_\udcff", "\ud800"):
        with pytest.raises(ConfigError, match="PALIMPSEST_HERMES_MEMORY"):
            s.load_direct(_direct(MEMORY=bad_memory))
    assert s.load_direct(_direct(TOKEN="t" * 4096)).token == "t" * 4096
    for bad_token in ("", "t" * 4097, "tok en", "tok\r\nX-Evil: 1", "tökén"):
        with pytest.raises(ConfigError, match="PALIMPSEST_HERMES_TOKEN"):
            s.load_direct(_direct(TOKEN=bad_token))


def _credential(path: Path, token: str = "tok-file", mode: int = 0o600) -> Path:  # noqa: S107
    path.write_text(token + "\n")
    os.chmod(path, mode)
    return path


def test_token_file_must_be_private(tmp_path: Path) -> None:
    good = _credential(tmp_path / "cred")
    env = {"PALIMPSEST_HERMES_MEMORY": "hmem_a", "PALIMPSEST_HERMES_TOKEN_FILE": str(good)}
    assert s.load_direct(env).token == "tok-file"
    for mode in (0o640, 0o604, 0o666):
        os.chmod(good, mode)
        with pytest.raises(ConfigError, match="0600"):
            s.load_direct(env)
    env["PALIMPSEST_HERMES_TOKEN_FILE"] = str(tmp_path / "missing")
    with pytest.raises(ConfigError, match="missing"):
        s.load_direct(env)
    env["PALIMPSEST_HERMES_TOKEN_FILE"] = "relative/cred"
    with pytest.raises(ConfigError, match="absolute"):
        s.load_direct(env)


def _connection(tmp_path: Path, **doc: object) -> Path:
    base: dict[str, object] = {
        "version": 1,
        "server_url": "http://127.0.0.1:9000",
        "credential_file": str(_credential(tmp_path / "agent.cred")),
        "memory_id": "hmem_team",
    }
    base.update(doc)
    path = tmp_path / "connection.json"
    path.write_text(json.dumps(base))
    return path


def test_managed_connection_file_beside_the_plugin(tmp_path: Path) -> None:
    _connection(tmp_path)
    config = s.load_settings({}, tmp_path)
    assert config.mode == "managed"
    assert (config.url, config.memory_id, config.token) == (
        "http://127.0.0.1:9000",
        "hmem_team",
        "tok-file",
    )
    # managed installations are read-only even if the environment asks for capture
    assert (
        s.load_settings({"PALIMPSEST_HERMES_AUTO_CAPTURE": "true"}, tmp_path).auto_capture is False
    )
    # tuning bounds apply in managed mode as well
    with pytest.raises(ConfigError, match="LIMIT"):
        s.load_settings({"PALIMPSEST_HERMES_LIMIT": "21"}, tmp_path)


def test_managed_connection_file_is_reloaded_on_each_call(tmp_path: Path) -> None:
    path = _connection(tmp_path)
    assert s.load_settings({}, tmp_path).memory_id == "hmem_team"
    _connection(tmp_path, memory_id="hmem_other")
    assert s.load_settings({}, tmp_path).memory_id == "hmem_other"
    (tmp_path / "agent.cred").unlink()
    with pytest.raises(ConfigError, match="missing"):
        s.load_settings({}, tmp_path)
    assert path.exists()


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"version": 2}, "version"),
        ({"version": True}, "version"),  # True == 1 in Python (found by the fuzz target)
        ({"version": 1.0}, "version"),
        ({"extra": 1}, "unknown key"),
        ({"memory_id": 5}, "memory_id"),
        ({"server_url": "http://evil.example"}, "https"),
    ],
)
def test_managed_connection_file_refusals(
    tmp_path: Path, doc: dict[str, object], message: str
) -> None:
    _connection(tmp_path, **doc)
    with pytest.raises(ConfigError, match=message):
        s.load_settings({}, tmp_path)


def test_connection_file_strict_json(tmp_path: Path) -> None:
    path = tmp_path / "connection.json"
    path.write_text('{"version":1,"version":1}')
    with pytest.raises(ConfigError, match="duplicate"):
        s.load_settings({}, tmp_path)
    path.write_text('{"version":NaN}')
    with pytest.raises(ConfigError, match="JSON"):
        s.load_settings({}, tmp_path)
    path.write_text(" " * (s.MAX_CONNECTION_BYTES + 1))
    with pytest.raises(ConfigError, match="larger"):
        s.load_settings({}, tmp_path)
    # found by the hermes_connection fuzz target: a RecursionError escaped the ConfigError
    path.write_text("[" * 5000)
    with pytest.raises(ConfigError, match="nests too deeply"):
        s.load_settings({}, tmp_path)


@pytest.mark.parametrize("suffix", ["\x00", "\x1b[2J", "\n"])
def test_19_control_characters_in_file_paths_refused(tmp_path: Path, suffix: str) -> None:
    # Found by the hermes_connection fuzz target: a JSON "\u0000" in credential_file made
    # stat() raise ValueError past ConfigError; other controls were echoed into the message.
    _connection(tmp_path, credential_file=str(tmp_path / f"agent{suffix}.cred"))
    with pytest.raises(ConfigError, match="control characters") as caught:
        s.load_settings({}, tmp_path)
    assert suffix not in str(caught.value)
    env = {"PALIMPSEST_HERMES_CONNECTION_FILE": str(tmp_path / f"c{suffix}.json")}
    with pytest.raises(ConfigError, match="control characters"):
        s.load_settings(env, tmp_path)


def test_19_credential_path_that_is_no_file_name_refused(tmp_path: Path) -> None:
    # Found by the hermes_connection fuzz target: a JSON "\ud800" in credential_file made
    # stat() raise UnicodeEncodeError past ConfigError.
    _connection(tmp_path, credential_file=str(tmp_path / "agent\ud800.cred"))
    with pytest.raises(ConfigError, match="not a valid file name"):
        s.load_settings({}, tmp_path)
    # undecodable environment bytes (surrogateescape) are a file name like any other
    token = _credential(tmp_path / os.fsdecode(b"agent\xff.cred"))
    env = {"PALIMPSEST_HERMES_MEMORY": "hmem_a", "PALIMPSEST_HERMES_TOKEN_FILE": str(token)}
    assert s.load_direct(env).token == "tok-file"


def test_explicit_connection_file_must_be_absolute(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="absolute"):
        s.load_settings({"PALIMPSEST_HERMES_CONNECTION_FILE": "conn.json"}, tmp_path)
    other = tmp_path / "elsewhere"
    other.mkdir()
    path = _connection(other)
    env = {"PALIMPSEST_HERMES_CONNECTION_FILE": str(path)}
    assert s.load_settings(env, tmp_path).mode == "managed"


def test_configured_needs_no_network(tmp_path: Path) -> None:
    assert s.configured({}, tmp_path) is False
    assert s.configured({"PALIMPSEST_HERMES_MEMORY": "hmem_a"}, tmp_path) is True
    _connection(tmp_path)
    assert s.configured({}, tmp_path) is True


def test_ca_file_must_be_an_absolute_existing_file(tmp_path: Path) -> None:
    assert s.load_direct(_direct()).ca_file is None
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    assert s.load_direct(_direct(CA_FILE=str(pem))).ca_file == str(pem)
    for bad in ("ca.pem", str(tmp_path / "missing.pem"), str(tmp_path)):
        with pytest.raises(ConfigError, match="PALIMPSEST_HERMES_CA_FILE"):
            s.load_direct(_direct(CA_FILE=bad))
