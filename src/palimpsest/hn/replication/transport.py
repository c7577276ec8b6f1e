"""Git transport for replication: advertisement, quarantine, fetch, measurement, promotion, push.

This is the I/O shell of :mod:`palimpsest.hn.replication` and, with ``hn/store/``, one of the
only places that runs Git.  Every subprocess gets a scrubbed environment (security-tests.md §3
C16): no inherited ``GIT_*`` variables, system and global configuration disabled, lazy fetching
disabled (``GIT_NO_LAZY_FETCH=1``), no terminal prompts, hooks and fsmonitor neutralised and the
``ext``/``fd`` transports refused with ``-c``.  Untrusted names never reach an argument list
unvalidated, and a ``--`` separates options from URLs.

Remote objects arrive only in a throw-away bare *quarantine* repository (security-tests.md §1.3:
fetch has no quarantine of its own).  The quarantine borrows the main object store through
``objects/info/alternates`` (read-only, so anchors resolve and fetches stay incremental); the main
store never sees quarantine objects until promotion copies the objects of validated roots.

This module does not decide validity; it measures and moves.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from palimpsest.errors import Conflict, InvalidInput, Unavailable
from palimpsest.hn.replication.selection import ensure_private_dir, is_hex64

_HARDENING = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "protocol.ext.allow=never",
    "-c", "protocol.fd.allow=never",
    "-c", "credential.helper=",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)  # fmt: skip
_TIMEOUT_SECONDS = 600
MEMORY_PREFIX = "refs/hn/memory/"
QUARANTINE_PREFIX = "refs/hn/quarantine/memory/"


def git_env() -> dict[str, str]:
    """A scrubbed environment for Git: nothing inherited but PATH, HOME and the locale."""
    env = {
        key: os.environ[key]
        for key in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
        if key in os.environ
    }
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_NO_LAZY_FETCH="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="true",
        SSH_ASKPASS="true",
        GIT_NO_REPLACE_OBJECTS="1",
        LC_ALL="C",
    )
    return env


def run_git(
    args: Iterable[str],
    *,
    git_dir: Path | None = None,
    stdin: bytes | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run one hardened ``git`` command and capture its output.

    Raises:
        Unavailable: code ``git-failed`` when ``check`` and Git exits non-zero.
    """
    argv = ["git", *_HARDENING]
    if git_dir is not None:
        argv.append(f"--git-dir={git_dir}")
    argv.extend(args)
    try:
        done = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            env=git_env(),
            timeout=_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"git could not run: {type(exc).__name__}", code="git-failed") from exc
    if check and done.returncode != 0:
        raise Unavailable(
            f"git {_verb(argv)} failed: {_first_line(done.stderr)}", code="git-failed"
        )
    return done


def _verb(argv: list[str]) -> str:
    for item in argv[1:]:
        if not item.startswith("-") and "=" not in item:
            return item
    return "command"


def _first_line(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[-1][:300] if text else "no diagnostic"


def git_dir_of(path: Path) -> Path:
    """The absolute Git directory of the repository at ``path`` (work tree or bare).

    Raises:
        InvalidInput: code ``not-a-repository``.
    """
    done = run_git(["-C", str(path), "rev-parse", "--absolute-git-dir"], check=False)
    if done.returncode != 0:
        raise InvalidInput(
            f"{path} is not a Git repository", code="not-a-repository", hint="run inside a clone"
        )
    return Path(done.stdout.decode("utf-8").strip())


def object_format(git_dir: Path) -> str:
    """``sha1`` or ``sha256``."""
    return run_git(["rev-parse", "--show-object-format"], git_dir=git_dir).stdout.decode().strip()


def remote_url(git_dir: Path, remote: str, *, push: bool = False) -> str:
    """The configured (push) URL of ``remote``.

    Raises:
        InvalidInput: code ``unknown-remote`` when the remote is not configured.
    """
    args = ["remote", "get-url", *(["--push"] if push else []), "--", remote]
    done = run_git(args, git_dir=git_dir, check=False)
    url = done.stdout.decode("utf-8", "replace").strip()
    if done.returncode != 0 or not url:
        raise InvalidInput(
            f"remote {remote} is not configured",
            code="unknown-remote",
            hint=f"add it with: git remote add {remote} URL",
        )
    return url


def is_shallow(git_dir: Path) -> bool:
    """True when the repository is a shallow clone."""
    done = run_git(["rev-parse", "--is-shallow-repository"], git_dir=git_dir)
    return done.stdout.strip() == b"true"


@dataclass(frozen=True, slots=True)
class AdvertisedRef:
    """One well-formed ``refs/hn/memory/<actor>/<stream hex>`` ref a remote advertises."""

    actor: str
    stream_hex: str
    oid: str

    @property
    def ref(self) -> str:
        """The ref name on the remote."""
        return f"{MEMORY_PREFIX}{self.actor}/{self.stream_hex}"

    @property
    def stream(self) -> str:
        """The full stream ID."""
        return f"sha256:{self.stream_hex}"


@dataclass(frozen=True, slots=True)
class Advertisement:
    """The memory refs of a remote: well-formed ones, and the names of malformed ones."""

    refs: tuple[AdvertisedRef, ...]
    malformed: tuple[str, ...]

    def owners(self, stream: str) -> list[AdvertisedRef]:
        """Every advertised ref of ``stream`` (more than one means ambiguous owners)."""
        return [item for item in self.refs if item.stream == stream]


def _valid_oid(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def parse_advertisement(output: bytes) -> Advertisement:
    """Parse ``git ls-remote --refs`` output; keep only refs below ``refs/hn/memory/``.

    Refs with a bad shape (upper case, extra components, ``.lock`` ...) are listed as malformed
    and never fetched.  Refs outside the memory namespace are ignored.

    Raises:
        Unavailable: code ``bad-advertisement`` when a line is not ``<oid> TAB <ref>``.
    """
    refs: list[AdvertisedRef] = []
    malformed: list[str] = []
    for raw in output.split(b"\n"):
        if not raw:
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            malformed.append(raw.decode("utf-8", "replace"))
            continue
        oid, tab, ref = line.partition("\t")
        if not tab or not _valid_oid(oid):
            raise Unavailable("remote advertisement is malformed", code="bad-advertisement")
        if not ref.startswith(MEMORY_PREFIX):
            continue
        parts = ref[len(MEMORY_PREFIX) :].split("/")
        if len(parts) != 2 or not is_hex64(parts[0]) or not is_hex64(parts[1]):
            malformed.append(ref)
            continue
        refs.append(AdvertisedRef(actor=parts[0], stream_hex=parts[1], oid=oid))
    refs.sort(key=lambda item: (item.stream_hex, item.actor))
    return Advertisement(refs=tuple(refs), malformed=tuple(sorted(malformed)))


def advertise(url: str) -> Advertisement:
    """List the remote's memory refs (``git ls-remote --refs``).

    Raises:
        Unavailable: code ``remote-unavailable`` when the remote cannot be listed.
    """
    done = run_git(["ls-remote", "--refs", "--", url, f"{MEMORY_PREFIX}*"], check=False)
    if done.returncode != 0:
        raise Unavailable(
            f"cannot list the remote: {_first_line(done.stderr)}", code="remote-unavailable"
        )
    return parse_advertisement(done.stdout)


def replication_dir(git_dir: Path) -> Path:
    """``<git-dir>/hn/replication``."""
    return git_dir / "hn" / "replication"


@dataclass(frozen=True, slots=True)
class Quarantine:
    """A throw-away bare repository below ``<git-dir>/hn/replication/quarantine/txn-*``."""

    txn: str
    path: Path

    def ref(self, actor: str, stream_hex: str) -> str:
        """The quarantine ref of one stream."""
        return f"{QUARANTINE_PREFIX}{actor}/{stream_hex}"


def create_quarantine(git_dir: Path) -> Quarantine:
    """Create a fresh bare quarantine that can read (never write) the main object store."""
    return new_quarantine(replication_dir(git_dir) / "quarantine",
                          object_format=object_format(git_dir), borrow=git_dir / "objects")


def new_quarantine(parent: Path, *, object_format: str = "sha1",
                   borrow: Path | None = None) -> Quarantine:
    """A fresh private bare repository ``<parent>/txn-<hex>``; ``borrow``: an object store it
    may read through ``objects/info/alternates`` (never write). An import into the memory
    service has no object store to borrow: its quarantine stands alone."""
    ensure_private_dir(parent)
    txn = secrets.token_hex(8)
    path = parent / f"txn-{txn}"
    run_git(
        [
            "init", "--bare", "--quiet", "--template=",
            f"--object-format={object_format}", "--", str(path),
        ]
    )  # fmt: skip
    os.chmod(path, 0o700)
    if borrow is not None:
        alternates = path / "objects" / "info" / "alternates"
        alternates.write_text(f"{borrow.resolve()}\n", encoding="utf-8")
    return Quarantine(txn=txn, path=path)


def remove_quarantines(git_dir: Path, parent: Path | None = None) -> list[str]:
    """Delete every leftover quarantine (caller holds the sync lock); return their names.
    ``parent``: where :func:`new_quarantine` made them (default: this repository's)."""
    parent = parent or replication_dir(git_dir) / "quarantine"
    if not parent.is_dir() or parent.is_symlink():
        return []
    removed = []
    for entry in sorted(parent.iterdir()):
        if entry.name.startswith("txn-") or entry.name.startswith(".txn-"):
            if entry.is_symlink() or not entry.is_dir():
                entry.unlink()
            else:
                shutil.rmtree(entry)
            removed.append(entry.name)
    return removed


def discard_quarantine(quarantine: Quarantine) -> None:
    """Remove one quarantine repository."""
    if quarantine.path.is_dir():
        shutil.rmtree(quarantine.path)


def fetch_into_quarantine(
    quarantine: Quarantine, url: str, items: list[AdvertisedRef], *, full_history: bool = False
) -> str | None:
    """Fetch advertised streams into their quarantine refs; return a diagnostic or ``None``.

    Objects are fsck-checked on arrival.  Callers compare each fetched head with the advertised
    one.  ``full_history`` stops the quarantine from offering the main store's refs as "haves",
    so a history the (shallow) main store lacks is sent in full.
    """
    no_haves = ["-c", "core.alternateRefsPrefixes=refs/hn/none/"] if full_history else []
    refspecs = [f"+{item.ref}:{quarantine.ref(item.actor, item.stream_hex)}" for item in items]
    return fetch_refspecs(quarantine, url, refspecs, options=no_haves)


def fetch_refspecs(quarantine: Quarantine, url: str, refspecs: list[str], *,
                   options: Iterable[str] = ()) -> str | None:
    """Fetch ``refspecs`` from ``url`` into the quarantine, every object fsck-checked on
    arrival (a malformed one fails the fetch); return a diagnostic or ``None``."""
    done = run_git(
        [
            *options,
            "-c", "fetch.fsckObjects=true", "-c", "transfer.fsckObjects=true",
            "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
            "--", url, *refspecs,
        ],
        git_dir=quarantine.path,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return f"fetch failed: {_first_line(done.stderr)}"
    return None


def fetch_exact_shallow(git_dir: Path, url: str, oid: str) -> str | None:
    """Fetch exactly one commit (depth 1) into the main store for shallow recovery.

    Only that commit and its tree arrive; it becomes a shallow boundary, so nothing else is
    deepened.  Returns a diagnostic, or ``None`` on success.
    """
    if not _valid_oid(oid):
        return "not an object ID"
    done = run_git(
        [
            "-c", "fetch.fsckObjects=true",
            "fetch", "--quiet", "--depth=1", "--no-tags", "--no-write-fetch-head",
            "--no-recurse-submodules", "--", url, oid,
        ],
        git_dir=git_dir,
        check=False,
    )  # fmt: skip
    return None if done.returncode == 0 else f"fetch failed: {_first_line(done.stderr)}"


def resolve_ref(git_dir: Path, ref: str) -> str | None:
    """The object ID a ref names, or ``None`` when it does not exist."""
    done = run_git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], git_dir=git_dir,
                   check=False)  # fmt: skip
    text = done.stdout.decode("ascii", "replace").strip()
    return text if done.returncode == 0 and _valid_oid(text) else None


def list_refs(git_dir: Path, prefix: str) -> dict[str, str]:
    """``{ref: oid}`` for every ref below ``prefix``."""
    done = run_git(["for-each-ref", "--format=%(objectname) %(refname)", "--", prefix],
                   git_dir=git_dir)  # fmt: skip
    refs: dict[str, str] = {}
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        oid, _, ref = line.partition(" ")
        refs[ref] = oid
    return refs


def is_ancestor(git_dir: Path, ancestor: str, descendant: str) -> bool:
    """True when ``ancestor`` is reachable from ``descendant``."""
    done = run_git(["merge-base", "--is-ancestor", ancestor, descendant], git_dir=git_dir,
                   check=False)  # fmt: skip
    return done.returncode == 0


@dataclass(frozen=True, slots=True)
class Measurement:
    """What a fetched stream would add: commits, new objects and their sizes."""

    events: int
    objects: int
    max_object_bytes: int
    attachment_bytes: int
    total_bytes: int

    def to_json(self) -> dict[str, int]:
        """Wire form for reports."""
        return {
            "events": self.events,
            "objects": self.objects,
            "maxObjectBytes": self.max_object_bytes,
            "attachmentBytes": self.attachment_bytes,
            "totalBytes": self.total_bytes,
        }


_MEMORY_FILES = frozenset({"memory.json", "signature"})


def measure(git_dir: Path, head: str, accepted: str | None, *, max_events: int,
            more_heads: Iterable[str] = (),
            plain_files: frozenset[str] = _MEMORY_FILES) -> Measurement:
    """Measure ``head`` (and ``more_heads``) in the quarantine against the previously
    accepted head.

    Events count every commit of the stream (bounded at ``max_events + 1``: enough to refuse);
    objects, sizes and attachment bytes count only objects not reachable from ``accepted``.
    Attachment bytes are blobs under any name other than ``plain_files`` (a memory stream's
    ``memory.json`` and ``signature``).
    """
    heads = [head, *more_heads]
    count = run_git(
        ["rev-list", "--count", f"--max-count={max_events + 1}", *heads, "--"], git_dir=git_dir
    )
    events = int(count.stdout.strip() or b"0")
    spec = [*heads, *(["--not", accepted] if accepted else [])]
    listing = run_git(["rev-list", "--objects", *spec, "--"], git_dir=git_dir)
    names: dict[str, str] = {}
    for line in listing.stdout.decode("utf-8", "replace").splitlines():
        oid, _, name = line.partition(" ")
        names[oid] = name
    if not names:
        return Measurement(events, 0, 0, 0, 0)
    batch = run_git(
        ["cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)"],
        git_dir=git_dir,
        stdin="".join(f"{oid}\n" for oid in names).encode("ascii"),
    )
    biggest = attachments = total = 0
    for line in batch.stdout.decode("ascii", "replace").splitlines():
        fields = line.split(" ")
        if len(fields) != 3 or not fields[2].isdigit():
            continue  # "<oid> missing" cannot happen after a connected fetch; validation decides
        size = int(fields[2])
        biggest = max(biggest, size)
        total += size
        if fields[1] == "blob" and names.get(fields[0], "").rsplit("/", 1)[-1] not in plain_files:
            attachments += size
    return Measurement(events, len(names), biggest, attachments, total)


def copy_objects(git_dir: Path, quarantine: Quarantine, refs: list[str]) -> None:
    """Copy the objects reachable from the given quarantine refs into the main store.

    Objects only: no ref is written here (the ref transaction follows), and nothing reachable
    only from unselected or invalid streams leaves the quarantine.

    Raises:
        Unavailable: Git could not copy the objects.
    """
    if not refs:
        return
    run_git(
        [
            "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
            "--", str(quarantine.path), *refs,
        ],
        git_dir=git_dir,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class RefUpdate:
    """One compare-and-swap ref update (``old`` ``None`` = the ref must not exist yet)."""

    ref: str
    new: str
    old: str | None


def update_refs_atomically(
    git_dir: Path,
    updates: list[RefUpdate],
    *,
    zero_oid: str,
    message: str,
    before_commit: Callable[[], None] | None = None,
) -> None:
    """Apply all updates in one ``git update-ref --stdin`` transaction (start/prepare/commit).

    Either every ref moves or none does; a concurrent change to any ref fails the whole
    transaction.  ``before_commit`` runs between *prepare* and *commit* (the crash-test hook).

    Raises:
        Conflict: code ``ref-conflict`` when the transaction could not be prepared or committed.
    """
    if not updates:
        return
    argv = ["git", *_HARDENING, f"--git-dir={git_dir}", "update-ref", "-m", message, "--stdin"]
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=git_env(),
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None  # noqa: S101 - pipes requested
        body = ["start"]
        body.extend(f"update {u.ref} {u.new} {u.old or zero_oid}" for u in updates)
        body.append("prepare")
        proc.stdin.write(("\n".join(body) + "\n").encode("ascii"))
        proc.stdin.flush()
        replies = [proc.stdout.readline(), proc.stdout.readline()]
        if replies != [b"start: ok\n", b"prepare: ok\n"]:
            proc.stdin.close()
            err = proc.stderr.read() if proc.stderr else b""
            proc.wait()
            raise Conflict(
                f"accepted refs changed during sync: {_first_line(err)}",
                code="ref-conflict",
                hint="run pal sync again",
            )
        if before_commit is not None:
            before_commit()
        proc.stdin.write(b"commit\n")
        proc.stdin.close()
        reply = proc.stdout.readline()
        err = proc.stderr.read() if proc.stderr else b""
        if proc.wait() != 0 or reply != b"commit: ok\n":
            raise Conflict(
                f"ref transaction failed: {_first_line(err)}",
                code="ref-conflict",
                hint="run pal sync again",
            )


def push_ref(git_dir: Path, url: str, ref: str) -> tuple[str, str]:
    """Push one ref to the same name, never forced; return ``(status, diagnostic)``.

    Status is ``published``, ``up-to-date`` or ``rejected``.
    """
    done = run_git(
        ["push", "--porcelain", "--no-verify", "--", url, f"{ref}:{ref}"],
        git_dir=git_dir,
        check=False,
    )
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        flag, _, rest = line.partition("\t")
        if rest.startswith(f"{ref}:{ref}"):
            if flag == "=":
                return "up-to-date", ""
            if flag in (" ", "*", "+") and done.returncode == 0:
                return "published", ""
            reason = rest.split("\t", 1)[1] if "\t" in rest else "rejected"
            return "rejected", reason
    if done.returncode == 0:
        return "published", ""
    return "rejected", _first_line(done.stderr)


__all__ = [
    "AdvertisedRef",
    "Advertisement",
    "Measurement",
    "Quarantine",
    "RefUpdate",
    "advertise",
    "copy_objects",
    "create_quarantine",
    "discard_quarantine",
    "fetch_exact_shallow",
    "fetch_into_quarantine",
    "fetch_refspecs",
    "git_dir_of",
    "git_env",
    "is_ancestor",
    "is_shallow",
    "list_refs",
    "measure",
    "new_quarantine",
    "object_format",
    "parse_advertisement",
    "push_ref",
    "remote_url",
    "remove_quarantines",
    "replication_dir",
    "resolve_ref",
    "run_git",
]
