"""``pal serve`` start-up rules and ``pal admin`` (members, groups, credentials, grants,
rebuild)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from palimpsest.cli.main import cli
from tests.api.server import err, ok, pal_command, start

ALL_INTERFACES = "0.0.0.0"  # noqa: S104 — the refusal to bind there is what is tested


def _admin(data_dir: Path, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["admin", "--data-dir", str(data_dir), *args, "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_first_start_prints_the_owner_credential_once(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = start(data_dir)
    try:
        assert first.owner and first.announce["owner"]["member_id"]
        with first.client(first.owner) as client:
            assert ok(client.get("/v1/uhp"))["capabilities"]["memories"] is True
    finally:
        assert first.stop() == 0
    second = start(data_dir)
    try:
        assert second.owner is None and "owner" not in second.announce
        with second.client(first.owner) as client:
            ok(client.get("/v1/memories"))  # the printed credential keeps working
    finally:
        second.stop()
    stored = b"".join(p.read_bytes() for p in data_dir.rglob("*") if p.is_file())
    assert first.owner.encode() not in stored  # only a hash is kept


def test_human_first_start_output(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        pal_command("serve", "--data-dir", str(tmp_path / "d"), "--port", "0"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().decode() for _ in range(5)]
    finally:
        proc.terminate()
        try:
            status = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # never leave a server behind, even when the test fails
            proc.wait(timeout=30)
            raise
    assert status == 0  # a SIGTERM right after start-up still shuts down cleanly
    assert lines[0].startswith("first start: created owner member ")
    assert lines[1].startswith("owner credential (shown once, store it now): ")
    assert lines[3].startswith("listening on http://127.0.0.1:")
    assert lines[4].startswith("review desk: http://127.0.0.1:") and "/ui/" in lines[4]
    assert all("\x1b" not in line for line in lines)


def test_non_loopback_bind_needs_configured_credentials(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    refused = subprocess.run(
        pal_command("serve", "--data-dir", str(data_dir), "--host", ALL_INTERFACES,
                    "--port", "0"),
        capture_output=True, timeout=60, check=False)
    assert refused.returncode == 1
    message = refused.stderr.decode()
    assert message.startswith("pal: refusing to listen on non-loopback address 0.0.0.0")
    assert message.count("\n") == 1
    assert refused.stdout == b""
    member = _admin(data_dir, "member", "create", "ops", "--type", "human", "--admin")
    made = _admin(data_dir, "credential", "create", member["id"])
    no_tls = subprocess.run(
        pal_command("serve", "--data-dir", str(data_dir), "--host", ALL_INTERFACES,
                    "--port", "0"),
        capture_output=True, timeout=60, check=False)
    assert no_tls.returncode == 1 and b"without TLS" in no_tls.stderr
    # start() adds --host 127.0.0.1 first; plain HTTP acknowledged (a TLS proxy in front)
    server = start(data_dir, "--host", ALL_INTERFACES, "--allow-plain-http")
    try:
        with server.client(made["secret"]) as client:
            ok(client.get("/v1/uhp"))
    finally:
        server.stop()


def test_admin_members_groups_credentials_grants_and_rebuild(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    owner_run = start(data_dir)
    owner_token = owner_run.owner
    assert owner_token
    try:
        with owner_run.client(owner_token) as owner:
            memory = ok(owner.post("/v1/memories", json={"name": "Shared"}))
            ok(owner.post(f"/v1/memories/{memory['id']}/records", json={"content": "hello"}))
    finally:
        owner_run.stop()

    agent = _admin(data_dir, "member", "create", "helper-bot", "--type", "agent")
    assert agent["type"] == "agent" and agent["object"] == "member"
    group = _admin(data_dir, "group", "create", "support")
    joined = _admin(data_dir, "group", "add", group["id"], agent["id"])
    assert joined["members"] == [agent["id"]]
    cred = _admin(data_dir, "credential", "create", agent["id"], "--label", "ci")
    secret = cred["secret"]
    listed = _admin(data_dir, "credential", "list", "--member", agent["id"])
    assert [c["id"] for c in listed] == [cred["credential"]["id"]]
    assert secret not in json.dumps(listed)
    grant = _admin(data_dir, "grant", "add", memory["id"], f"group:{group['id']}", "read")
    assert grant["privileges"] == ["read"]
    grants = _admin(data_dir, "grant", "list", memory["id"])
    assert grant["id"] in [g["id"] for g in grants["data"]]

    server = start(data_dir)
    try:
        with server.client(secret) as bot:
            got = ok(bot.get(f"/v1/memories/{memory['id']}"))
            assert got["privileges"] == ["read"]
            _admin(data_dir, "grant", "revoke", memory["id"], grant["id"])
            err(bot.get(f"/v1/memories/{memory['id']}"), 404, "memory_not_found")
            _admin(data_dir, "credential", "revoke", cred["credential"]["id"])
            err(bot.get("/v1/memories"), 401, "invalid_credential")
    finally:
        server.stop()

    report = _admin(data_dir, "rebuild")
    assert report["equal"] is True
    members = _admin(data_dir, "member", "list")
    assert {m["name"] for m in members} >= {"helper-bot"}


def test_admin_refusals_exit_one(tmp_path: Path) -> None:
    result = subprocess.run(
        pal_command("admin", "--data-dir", str(tmp_path / "d"), "credential", "revoke",
                    "no-such-credential"),
        capture_output=True, timeout=60, check=False)
    assert result.returncode == 1
    assert result.stderr.decode().startswith("pal: ")
    assert result.stderr.decode().count("\n") == 1


def test_make_run_starts_the_service() -> None:
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    run_recipe = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "pal serve" in run_recipe


def test_admin_human_output_has_no_control_bytes(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    hostile = "evil\x1b[2J\x1b]0;pwned\x07\u202ename"
    _admin(data_dir, "--create", "member", "create", hostile, "--type", "agent")
    _admin(data_dir, "group", "create", hostile)
    for args in (["member", "list"], ["group", "list"]):
        result = CliRunner().invoke(cli, ["admin", "--data-dir", str(data_dir), *args],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert "evil" in result.output
        for byte in ("\x1b", "\x07", "\u202e"):
            assert byte not in result.output, (args, result.output)
