"""Cost of provenance: signing per remember, receipt verification, export and verify.

Usage: ``.venv/bin/python bench/provenance.py [--remembers 2000] [--rounds 5]
[--receipts 500] [--changesets 10000] [--no-import] [--only-export]``

- ``signing``: ``remember`` through the service facade (the path every edge calls; one
  changeset, its projection and index, and now its signature, in one transaction) on one
  memory, in alternating blocks with the server's signer on and off (the same process, the
  same store, the same run), so a loaded machine slows both alike. Reports remembers/s by
  wall and by process CPU time, and the fraction lost to signing.
- ``receipts``: ``pal verify receipt``'s check (:func:`receipt.check`) over receipts of
  distinct records, against the strongest simple baseline: raw Ed25519 verification of the
  same two signatures each receipt holds (the receipt's and the changeset's), with the same
  cached verifier objects.
- ``export``: ``pal export --git`` and ``pal verify DIR`` of a memory holding ``--changesets``
  changesets (made with signing on), wall and CPU seconds; then ``pal import --git`` of that
  export into a fresh server (fetch into quarantine, measure, verify, promote) and whether
  the two servers' rebuild digests are equal.

Prints one JSON document; numbers go to docs/benchmarks.md with the load average.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from palimpsest import canonical
from palimpsest.identity import b64_nopad_decode, verifier
from palimpsest.service import history
from palimpsest.service.memories import MemoryService
from palimpsest.service.provenance import importer, receipt, signing
from palimpsest.service.provenance import verify as export_verify


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _block(svc: MemoryService, caller: Any, mid: str, n: int, start: int) -> tuple[float, float]:
    wall, cpu = _clocks()
    for i in range(n):
        svc.remember(caller, mid, {"type": "fact",
                                   "content": f"observation {start + i}: the deploy of build "
                                              f"{(start + i) * 7 % 9973} passed its checks"})
    w, c = _clocks()
    return w - wall, c - cpu


def signing_overhead(svc: MemoryService, caller: Any, mid: str, remembers: int,
                     rounds: int) -> dict[str, Any]:
    store = svc._store
    signer = lambda cs: svc.server_keys.sign(cs, history.canonical_bytes(cs))  # noqa: E731
    per = max(1, remembers // rounds)
    totals = {True: [0.0, 0.0, 0], False: [0.0, 0.0, 0]}
    _block(svc, caller, mid, 50, 0)  # warm caches
    done = 50
    for r in range(rounds * 2):
        on = r % 2 == 0
        store.set_signer(signer if on else None)
        w, c = _block(svc, caller, mid, per, done)
        done += per
        totals[on][0] += w
        totals[on][1] += c
        totals[on][2] += per
    store.set_signer(signer)

    def rate(on: bool) -> dict[str, float]:
        w, c, n = totals[on]
        return {"remembers": int(n), "per_s_wall": round(n / w, 1),
                "per_s_cpu": round(n / c, 1), "us_per_remember_cpu": round(c / n * 1e6, 1)}

    signed, unsigned = rate(True), rate(False)
    return {"signed": signed, "unsigned": unsigned,
            "fewer_remembers_wall_pct": round(100 * (1 - signed["per_s_wall"]
                                                     / unsigned["per_s_wall"]), 1),
            "fewer_remembers_cpu_pct": round(100 * (1 - signed["per_s_cpu"]
                                                    / unsigned["per_s_cpu"]), 1)}


def receipt_rate(svc: MemoryService, caller: Any, mid: str, n: int) -> dict[str, Any]:
    listed: list[dict[str, Any]] = []
    cursor = None
    while len(listed) < n:
        page = svc.list_records(caller, mid, include="active,provenance", limit=200,
                                cursor=cursor)
        # the blocks written with the signer off have no server signature: their receipts
        # are refused, as they must be; the rate is measured on signed history
        listed.extend(r for r in page["data"] if r["provenance"]["signatures"])
        cursor = page.get("next")
        if not cursor:
            break
    records = listed[:n]
    keys = signing.trusted_keys(svc.provenance_keys())
    wall, cpu = _clocks()
    for rec in records:
        receipt.check(rec, keys)
    w, c = _clocks()
    pairs = []
    for rec in records:
        prov = rec["provenance"]
        body = {k: v for k, v in prov.items() if k != "receipt_signature"}

        rs = prov["receipt_signature"]
        pairs.append((b64_nopad_decode(rs["public_key"], 32, "key"),
                      b64_nopad_decode(rs["signature"], 64, "sig"),
                      receipt.RECEIPT_DOMAIN + canonical.encode(body)))
        cs = prov["signatures"][0]
        pairs.append((b64_nopad_decode(cs["public_key"], 32, "key"),
                      b64_nopad_decode(cs["signature"], 64, "sig"),
                      base64.b64decode(prov["changeset"]["canonical"])))
    rc = time.process_time()
    for key, sig, data in pairs:
        verifier(key).verify(sig, data)
    rc2 = time.process_time()
    return {"receipts": len(records),
            "receipts_per_s_wall": round(len(records) / (w - wall), 1),
            "receipts_per_s_cpu": round(len(records) / (c - cpu), 1),
            "raw_ed25519_per_s_cpu": round(len(pairs) / (rc2 - rc), 1),
            "raw_two_signatures_per_s_cpu": round(len(pairs) / 2 / (rc2 - rc), 1),
            "receipt_vs_raw_two_signatures": round((len(records) / (c - cpu))
                                                   / (len(pairs) / 2 / (rc2 - rc)), 3)}


def export_cost(root: Path, changesets: int, *, with_import: bool = True) -> dict[str, Any]:
    with MemoryService(root / "big") as svc:
        made = svc.bootstrap_owner()
        assert made is not None
        owner = svc.caller(made[0].id)
        mid = svc.create_memory(owner, {"name": "big"})["id"]
        _block(svc, owner, mid, changesets, 0)
        wall, cpu = _clocks()
        report = svc.export_git(root / "big.git", mid)
        w, c = _clocks()
    vw, vc = _clocks()
    verified = export_verify.verify(root / "big.git")
    w2, c2 = _clocks()
    out = {"changesets": report["changesets"], "export_s_wall": round(w - wall, 2),
           "export_s_cpu": round(c - cpu, 2), "verify_s_wall": round(w2 - vw, 2),
           "verify_s_cpu": round(c2 - vc, 2), "verified": verified["changesets"]}
    if with_import:
        out["import"] = import_cost(root, changesets)
    return out


def import_cost(root: Path, changesets: int) -> dict[str, Any]:
    """``pal import --git`` of the export into a fresh server (quarantine, verify, promote),
    and whether both servers' rebuild digests are then equal."""
    with MemoryService(root / "big") as svc:
        keys = signing.trusted_keys(svc.provenance_keys())
        digest = svc.rebuild()["digest_after"]
    with MemoryService(root / "other") as svc:
        assert svc.bootstrap_owner() is not None
        budgets = replace(importer.DEFAULT_BUDGETS, max_events=changesets + 10)
        wall, cpu = _clocks()
        report = svc.import_git(root / "big.git", keys=keys, budgets=budgets)
        w, c = _clocks()
        equal = svc.rebuild()["digest_after"] == digest
    return {"status": report["status"], "import_s_wall": round(w - wall, 2),
            "import_s_cpu_this_process": round(c - cpu, 2),  # Git runs in subprocesses
            "rebuild_digest_equal": equal}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--remembers", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--receipts", type=int, default=500)
    parser.add_argument("--changesets", type=int, default=10000)
    parser.add_argument("--no-import", action="store_true", help="skip the import timing")
    parser.add_argument("--only-export", action="store_true",
                        help="skip the signing and receipt parts")
    args = parser.parse_args()
    out: dict[str, Any] = {"load_average": os.getloadavg(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if not args.only_export:
            with MemoryService(root / "data") as svc:
                made = svc.bootstrap_owner()
                assert made is not None
                owner = svc.caller(made[0].id)
                mid = svc.create_memory(owner, {"name": "bench"})["id"]
                out["signing"] = signing_overhead(svc, owner, mid, args.remembers, args.rounds)
                out["receipts"] = receipt_rate(svc, owner, mid, args.receipts)
        if args.changesets:
            out["export"] = export_cost(root, args.changesets, with_import=not args.no_import)
    out["load_average_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
