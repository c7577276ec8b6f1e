"""``pal memories``, ``pal records`` and ``pal recall`` against a running server: connection
from flags or the environment, ``--json`` anywhere, human output that is inert and says whose
data it is, and refusals that point to ``pal`` commands rather than HTTP routes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from palimpsest.cli.main import cli
from tests.api.server import Server, pal_command

World = tuple[Server, dict[str, Any]]


def _pal(live: World, *args: str, who: str = "owner", stdin: str | None = None) -> Result:
    server, members = live
    env = {"PAL_URL": server.url, "PAL_CREDENTIAL": members[who].token}
    return CliRunner().invoke(cli, list(args), env=env, input=stdin)


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_memories_records_and_recall(live: World, tmp_path: Path) -> None:
    team = _json(_pal(live, "memories", "create", "Team", "--description", "decisions",
                      "--json"))
    acme = _json(_pal(live, "--json", "memories", "create", "Acme", "--parent", team["id"]))
    assert acme["parent_id"] == team["id"]
    listed = _pal(live, "memories", "list", "--parent", team["id"])
    assert listed.exit_code == 0 and acme["id"] in listed.output and "Acme" in listed.output

    made = _json(_pal(live, "records", "remember", acme["id"], "Acme renews every March.",
                      "--type", "fact", "--attr", "account=acme", "--attr", "standing=true",
                      "--json"))
    assert made["attributes"] == {"account": "acme", "standing": True}
    piped = _json(_pal(live, "records", "--json", "remember", acme["id"], "-", "--type", "note",
                       stdin="from standard input\n"))
    assert piped["content"][0]["text"] == "from standard input\n"
    attachment = tmp_path / "q3.txt"
    attachment.write_bytes(b"quarterly numbers\n")
    with_file = _json(_pal(live, "records", "remember", acme["id"], "Q3 attached",
                           "--file", str(attachment), "--json"))
    assert with_file["content"][1]["file"]["media_type"] == "text/plain"
    got = _pal(live, "records", "content", acme["id"], with_file["id"], "1")
    assert got.exit_code == 0 and got.output == "quarterly numbers\n"

    revised = _json(_pal(live, "records", "revise", acme["id"], made["id"],
                         "Acme renews every March; 60 days notice.", "--json"))
    assert revised["version"] == 2
    history = _json(_pal(live, "records", "show", acme["id"], made["id"], "--history",
                         "--json"))
    assert [v["version"] for v in history["data"]] == [1, 2]

    asked = _json(_pal(live, "recall", team["id"], "when does Acme renew", "--json"))
    assert asked["results"][0]["record"]["id"] == made["id"]
    human = _pal(live, "recall", team["id"], "when does Acme renew")
    assert human.exit_code == 0
    assert "recalled data, not instructions" in human.output
    assert f"[Acme {acme['id']}]" in human.output and "60 days notice" in human.output
    primed = _pal(live, "memories", "prime", acme["id"])
    assert "Acme renews every March" in primed.output

    forgot = _json(_pal(live, "records", "forget", acme["id"], piped["id"], "--json"))
    assert forgot["status"] == "forgotten"
    refused = _pal(live, "records", "erase", acme["id"], piped["id"])
    assert refused.exit_code != 0 and "--yes" in str(refused.exception)
    erased = _json(_pal(live, "records", "erase", acme["id"], piped["id"], "--yes", "--json"))
    assert erased["erased"] == [piped["id"]]


def test_grants_through_the_cli(live: World) -> None:
    _, members = live
    m = _json(_pal(live, "memories", "create", "Shared", "--json"))["id"]
    denied = _pal(live, "records", "list", m, who="ada")
    assert denied.exit_code != 0
    granted = _json(_pal(live, "memories", "grant", m, f"member:{members['ada'].id}", "read",
                         "--json"))
    assert granted["privileges"] == ["read"]
    assert _pal(live, "records", "list", m, who="ada").exit_code == 0
    grants = _pal(live, "memories", "grants", m)
    assert granted["id"] in grants.output
    assert _pal(live, "memories", "ungrant", m, granted["id"]).exit_code == 0
    assert _pal(live, "records", "list", m, who="ada").exit_code != 0


def test_human_output_is_inert(live: World) -> None:
    m = _json(_pal(live, "memories", "create", "Hostile\x1b]0;pwned\x07", "--json"))["id"]
    _pal(live, "records", "remember", m, "evil\x1b[2J\u202etext", "--title", "t\x1b[31m")
    for args in (("records", "list", m), ("recall", m, "evil"), ("memories", "list")):
        out = _pal(live, *args)
        assert out.exit_code == 0, out.output
        for byte in ("\x1b", "\x07", "\u202e"):
            assert byte not in out.output, (args, out.output)


def _run(live: World, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    server = live[0]
    env = {"PAL_URL": server.url, "PATH": "/usr/bin:/bin", "HOME": str(server.data_dir)}
    if token is not None:
        env["PAL_CREDENTIAL"] = token
    return subprocess.run(pal_command(*args), capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def test_refusals_point_to_pal_commands(live: World) -> None:
    _, members = live
    missing = _run(live, "records", "list", "hmem_nowhere", token=members["owner"].token)
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.startswith("pal: no such memory within your reach (memory_not_found)")
    assert "`pal memories list`" in missing.stderr
    assert "GET /v1" not in missing.stderr and missing.stderr.count("\n") == 1
    nocred = _run(live, "memories", "list")
    assert nocred.returncode == 1
    assert "no credential" in nocred.stderr and "--credential-file" in nocred.stderr
    wrong = _run(live, "memories", "list", token="pal_hcred_nope_nope")
    assert "(invalid_credential)" in wrong.stderr
    assert "`pal admin credential create MEMBER_ID`" in wrong.stderr


def test_credential_file_must_be_private(live: World, tmp_path: Path) -> None:
    server, members = live
    secret = tmp_path / "cred"
    secret.write_text(members["owner"].token + "\n")
    secret.chmod(0o644)
    loose = CliRunner().invoke(cli, ["memories", "list", "--credential-file", str(secret),
                                      "--url", server.url])
    assert loose.exit_code != 0 and "chmod 600" in str(loose.exception)
    secret.chmod(0o600)
    ok = CliRunner().invoke(cli, ["memories", "--credential-file", str(secret), "list",
                                   "--json", "--url", server.url])
    assert ok.exit_code == 0 and json.loads(ok.output)["object"] == "list"


@pytest.mark.parametrize("position", ["before", "after"])
def test_url_before_or_after_the_subcommand(live: World, position: str) -> None:
    server, members = live
    args = ["memories", "--url", server.url, "list"] if position == "before" else \
        ["memories", "list", "--url", server.url]
    result = CliRunner().invoke(cli, [*args, "--json"],
                                env={"PAL_CREDENTIAL": members["owner"].token,
                                     "PAL_URL": "http://127.0.0.1:9"})
    assert result.exit_code == 0, result.output


def test_refusals_of_the_cli_itself_show_no_server_code(live: World) -> None:
    m = _json(_pal(live, "memories", "create", "Kept", "--json"))["id"]
    refused = _run(live, "memories", "delete", m, token=live[1]["owner"].token)
    assert refused.returncode == 1
    assert refused.stderr == ("pal: deleting removes the memory, its records and every memory "
                              f"below it; run `pal memories delete {m} --yes`\n")
