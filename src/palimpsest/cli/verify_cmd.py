"""``pal verify``: check provenance offline — a receipt, or a history exported to Git.

``pal verify receipt FILE --keys KEYS`` checks one receipt (or a record that carries one under
``provenance``, as ``include: ["provenance"]`` returns it) against the server's published
keys (``GET /v1/provenance/keys`` or ``pal admin key show --json``, saved to a file). ``pal
verify DIR`` checks a repository written by ``pal export --git``: every changeset's bytes,
every signature, every parent link and every ref against the signed ref statement. Neither
needs the server; each refusal names the part that failed and exits 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from palimpsest import canonical
from palimpsest.errors import InvalidInput, NotFound
from palimpsest.service.provenance import receipt, signing
from palimpsest.text import safe_text

MAX_FILE = 16 << 20


def _read_json(path: Path, what: str) -> Any:
    try:
        data = path.read_bytes()[:MAX_FILE + 1]
    except OSError as exc:
        raise NotFound(f"cannot read {what} {path}: {exc.strerror}", code="no-file",
                       hint="give the path of the file") from exc
    if len(data) > MAX_FILE:
        raise InvalidInput(f"{what} {path} is larger than {MAX_FILE} bytes", code="too-large")
    try:
        return canonical.decode(data, trailing_whitespace=True, allow_floats=True)
    except InvalidInput as exc:
        raise InvalidInput(f"{what} {path} is not strict JSON: {exc.message}",
                           code="invalid-json", hint="pass the file exactly as the server "
                           "returned it") from exc


def read_keys(path: Path | None) -> dict[str, str] | None:
    """The trusted keys of a published key set file (``None``: no file given)."""
    return signing.trusted_keys(_read_json(path, "key set")) if path is not None else None


def _emit(as_json: bool, doc: Any, lines: list[str]) -> None:
    if as_json:
        click.echo(canonical.encode_indent(doc).decode(), nl=False)
    else:
        for line in lines:
            click.echo(safe_text(line))


@click.command("verify")
@click.argument("target")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--keys", "keys_file", type=click.Path(path_type=Path, dir_okay=False),
              help="The server's published key set (GET /v1/provenance/keys).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def command(target: str, path: Path | None, keys_file: Path | None, as_json: bool) -> None:
    """Verify `receipt FILE` (needs --keys) or an exported repository DIR, offline."""
    if target == "receipt":
        if path is None:
            raise InvalidInput("pal verify receipt needs the receipt FILE", code="usage",
                               hint="pal verify receipt FILE --keys KEYS")
        keys = read_keys(keys_file)
        if keys is None:
            raise InvalidInput("a receipt is checked against the server's published keys",
                               code="usage", hint="save GET /v1/provenance/keys to a file and "
                               "pass it with --keys")
        report = receipt.check(_read_json(path, "receipt"), keys)
        review = report.get("review") or {}
        lines = [f"receipt verified: record {report['record_id']} version {report['version']}",
                 f"changeset {report['changeset_id']} signed by "
                 + ", ".join(str(s) for s in report["signatures"])]
        if review:
            lines.append(f"admitted by review: proposal {review.get('proposal_id')}, "
                         f"reviewer {review.get('reviewer')}, merge authorization "
                         f"{review.get('merge_authorization_id')}")
        if not report["record_checked"]:
            lines.append("(a receipt alone: give the record carrying it to check its content)")
        _emit(as_json, report, lines)
        return
    if path is not None:
        raise InvalidInput("pal verify takes one repository directory", code="usage",
                           hint="pal verify DIR [--keys KEYS]")
    from palimpsest.service.provenance import verify  # noqa: PLC0415 — pygit2 only here

    report = verify.verify(Path(target), read_keys(keys_file))
    _emit(as_json, report, [
        f"verified {report['changesets']} changesets, {report['signatures']} signatures, "
        f"{report['refs']} refs of {len(report['memories'])} memories",
        f"keys: {report['keys']}"])
