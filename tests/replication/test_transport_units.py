"""Advertisement parsing and URL redaction: the pure parts of the transport."""

from __future__ import annotations

import pytest

from palimpsest.errors import Unavailable
from palimpsest.hn.replication.report import redact_url
from palimpsest.hn.replication.transport import parse_advertisement

A = "a" * 64
S = "b" * 64
OID = "c" * 40


def test_advertisement_keeps_only_well_formed_memory_refs() -> None:
    lines = [
        f"{OID}\trefs/hn/memory/{A}/{S}",
        f"{OID}\trefs/hn/memory/{A.upper()}/{S}",  # upper case
        f"{OID}\trefs/hn/memory/{A}/{S}/extra",  # extra component
        f"{OID}\trefs/hn/memory/{A}/{S[:-1]}",  # short
        f"{OID}\trefs/hn/memory/{A}/{S}.lock",
        f"{OID}\trefs/heads/refs/hn/memory/{A}/{S}",  # tail match of ls-remote, not ours
        f"{OID}\trefs/heads/main",
    ]
    ad = parse_advertisement(("\n".join(lines) + "\n").encode())
    assert [(r.actor, r.stream_hex, r.oid) for r in ad.refs] == [(A, S, OID)]
    assert len(ad.malformed) == 4
    assert ad.owners(f"sha256:{S}")[0].ref == f"refs/hn/memory/{A}/{S}"


@pytest.mark.parametrize("line", [b"nonsense\n", b"zz" * 20 + b"\trefs/x\n", b"\trefs/x\n"])
def test_malformed_advertisement_lines_refused(line: bytes) -> None:
    with pytest.raises(Unavailable):
        parse_advertisement(line)


def test_two_owners_of_one_stream_are_both_listed() -> None:
    other = "d" * 64
    ad = parse_advertisement(
        f"{OID}\trefs/hn/memory/{A}/{S}\n{OID}\trefs/hn/memory/{other}/{S}\n".encode()
    )
    assert sorted(r.actor for r in ad.owners(f"sha256:{S}")) == [A, other]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:secret@example.invalid/r.git", "https://example.invalid/r.git"),
        ("https://token@example.invalid:8443/r.git", "https://example.invalid:8443/r.git"),
        ("file:///srv/r.git", "file:///srv/r.git"),
        ("/srv/r.git", "/srv/r.git"),
    ],
)
def test_credentials_never_reported(url: str, shown: str) -> None:
    assert redact_url(url) == shown
