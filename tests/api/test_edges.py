"""The edges of ``pal serve``: an unauthenticated ``/mcp`` gets a bearer challenge and no OAuth
metadata; security headers on every answer (refusals before any route included); HTTPS with a
certificate; credentials never in the access log."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.api.server import Server, ok, provision, start

HEADERS = {"x-content-type-options": "nosniff", "x-frame-options": "DENY"}


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, Any]]]:
    data_dir = tmp_path_factory.mktemp("edges") / "data"
    members = provision(data_dir, (("alice", "agent"),))
    server = start(data_dir, "--log-level", "info")
    try:
        yield server, members
    finally:
        server.stop()


def test_unauthenticated_mcp_gets_a_bearer_challenge_and_no_oauth(
        logged: tuple[Server, dict[str, Any]]) -> None:
    server, members = logged
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"accept": "application/json, text/event-stream"}
    with server.client(None, **accept) as anonymous:
        refused = anonymous.post("/mcp", json=hello)
        assert refused.status_code == 401
        challenge = refused.headers["www-authenticate"]
        assert challenge == 'Bearer realm="palimpsest"'
        assert "resource_metadata" not in challenge and "authorization_uri" not in challenge
        # no OAuth discovery document to start a flow from
        for path in ("/.well-known/oauth-protected-resource",
                     "/.well-known/oauth-authorization-server"):
            assert anonymous.get(path).status_code in (401, 404)
    with server.client("pal_hcred_nope_" + "x" * 30, **accept) as wrong:
        assert wrong.post("/mcp", json=hello).headers["www-authenticate"] == (
            'Bearer realm="palimpsest", error="invalid_token"')
    with server.client(members["alice"].token, **accept) as alice:
        assert alice.post("/mcp", json=hello).status_code == 200


def test_security_headers_on_every_answer(logged: tuple[Server, dict[str, Any]]) -> None:
    server, members = logged
    with server.client(members["alice"].token) as alice, server.client(None) as anonymous:
        answers = [
            alice.get("/v1/uhp"), alice.post("/v1/memories", json={"name": "H"}),
            alice.post("/v1/memories", json={"name": 5}), anonymous.get("/v1/memories"),
            anonymous.get("/healthz"), anonymous.get("/metrics"), alice.get("/nowhere"),
            httpx.get(f"{server.url}/healthz", headers={"host": "evil.example"}),
            anonymous.get("/docs"), anonymous.get("/ui/"),
        ]
    for response in answers:
        for name, value in HEADERS.items():
            assert response.headers.get(name) == value, (response.request.url, name)
        for name in ("content-security-policy", "referrer-policy"):  # the desk sets its own
            assert name in response.headers, (response.request.url, name)
        assert "strict-transport-security" not in response.headers  # plain HTTP: no promise
    # a route's own policy wins (the docs page loads its script)
    assert answers[-2].headers["content-security-policy"] != "default-src 'none'; " \
                                                             "frame-ancestors 'none'"


def test_credentials_never_reach_the_access_log(logged: tuple[Server, dict[str, Any]]) -> None:
    server, members = logged
    secret = members["alice"].token
    forged = secret[:-6] + "AAAAAA"
    with server.client(secret) as alice, server.client(forged) as wrong:
        ok(alice.get("/v1/uhp"))
        assert wrong.get("/v1/uhp").status_code == 401
        alice.get(f"/v1/memories/{secret}")  # a secret pasted into a path
    with server.client(None, Authorization=f"bearer   {secret}") as spaced:
        ok(spaced.get("/v1/uhp"))
    log = server.stderr()
    assert '"route":"/v1/uhp"' in log and '"status":401' in log  # the lines are there
    # pal_hcred_<id>_<secret>: the secret part may itself hold "_" (it once ended in "_GE")
    tail = secret.split("_", 3)[3]
    for needle in (secret, forged, tail, forged.split("_", 3)[3]):
        assert needle not in log
    assert "\\u003credacted\\u003e" in log  # canonical JSON escapes < and >


def _certificate(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_https_with_a_certificate(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    data_dir = tmp_path / "data"
    members = provision(data_dir, (("alice", "agent"),))
    server = start(data_dir, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        assert server.url.startswith("https://127.0.0.1:")
        trust = ssl.create_default_context(cafile=str(cert))
        with httpx.Client(base_url=server.url, verify=trust, headers={
                "Authorization": f"Bearer {members['alice'].token}"}) as alice:
            answer = alice.get("/v1/uhp")
            assert answer.status_code == 200
            assert answer.headers["strict-transport-security"] == "max-age=31536000"
        with pytest.raises(httpx.HTTPError):  # the plain-HTTP face does not exist
            httpx.get(server.url.replace("https://", "http://") + "/healthz", timeout=5)
    finally:
        server.stop()
