"""Search answers alike on both stores: the same records written to the embedded store (FTS5's
``bm25()``) and to PostgreSQL (the analyser's tokens under GIN, ranked by
:mod:`palimpsest.search.bm25` with the statistics kept in the write) give the same candidates
in the same order with the same scores, and a recall the same results — over the whole store
and within a narrower reach.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from palimpsest.search.analyzer import query_terms
from palimpsest.service import MemoryService
from tests.conftest import Backend
from tests.service.conftest import FakeClock

pytestmark = pytest.mark.postgres
BACKENDS = ("postgresql",)  # each test writes the same records to both stores itself

WORDS = ("harbour", "lantern", "copper", "violet", "orchard", "glacier", "pepper", "saddle",
         "marble", "thunder", "quartz", "meadow", "falcon", "ember", "tundra", "walnut")
QUERIES = ("harbour lantern", "copper", "violet orchard glacier", "pepper saddles",
           "marble thunder quartz meadow", "falcon", "where is the walnut ember",
           "lantern copper violet", "tundra", "東京 駅")


def _texts() -> list[str]:
    out = []
    for i in range(48):
        picked = [WORDS[(i * k + k * k) % len(WORDS)] for k in range(1, 2 + i % 7)]
        out.append(" ".join(picked) + f" note {i}" + (" 東京駅の近く" if i % 11 == 0 else ""))
    return out


def _fill(svc: MemoryService, clock: FakeClock) -> tuple[Any, list[str]]:
    made = svc.bootstrap_owner("owner")
    assert made is not None
    owner = svc.caller(made[0].id)
    mids = [svc.create_memory(owner, {"name": f"m{j}"})["id"] for j in range(3)]
    for i, text in enumerate(_texts()):
        if i % 4 == 0:  # episodes: indexed with the episode before them as context
            svc.observe(owner, mids[i % 3], {"episodes": [
                {"content": text, "attributes": {"session_id": f"s{i % 2}"}}]})
        else:
            svc.remember(owner, mids[i % 3], {"content": text})
        clock.tick(1000 if i % 9 else 60_000)
    return owner, mids


@pytest.fixture
def pair(backend: Backend, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    sides = []
    for name, url in (("sqlite", None), ("postgresql", backend.database_url)):
        clock = FakeClock()
        svc = MemoryService(tmp_path / name, clock=clock, database=url)
        sides.append((svc, *_fill(svc, clock)))
    yield sides[0], sides[1]
    for svc, *_ in sides:
        svc.close()


def _hits(svc: MemoryService, mids: list[str], terms: list[str]) -> list[tuple[int, str, float]]:
    store = svc._store
    with store.read():
        return [(h.n, h.text, h.score) for h in store.search(terms, mids, ("active",), None, 20)]


def test_the_same_query_gives_the_same_candidates_scores_and_order(
        pair: tuple[Any, Any]) -> None:
    (lite, _, lite_mids), (pg, _, pg_mids) = pair
    for q in QUERIES:
        terms = query_terms(q)
        for reach in (slice(0, 3), slice(0, 1)):
            a = _hits(lite, lite_mids[reach], terms)
            b = _hits(pg, pg_mids[reach], terms)
            assert [(n, t) for n, t, _ in a] == [(n, t) for n, t, _ in b], q
            assert all(math.isclose(x[2], y[2], rel_tol=1e-9) for x, y in zip(a, b, strict=True))
            assert a, q  # every query finds something: the comparison is never empty
        with lite._store.read(), pg._store.read():
            assert lite._store.term_docs(terms, lite_mids[:1]) == \
                pg._store.term_docs(terms, pg_mids[:1])
            assert lite._store.reach_size(lite_mids[:1]) == pg._store.reach_size(pg_mids[:1])


def test_recall_answers_alike(pair: tuple[Any, Any]) -> None:
    (lite, lite_owner, lite_mids), (pg, pg_owner, pg_mids) = pair
    for q in QUERIES:
        for j in (0, 1):
            a = lite.recall(lite_owner, lite_mids[j], {"query": q, "limit": 8})["results"]
            b = pg.recall(pg_owner, pg_mids[j], {"query": q, "limit": 8})["results"]
            assert [r["record"]["content"][0]["text"] for r in a] == \
                [r["record"]["content"][0]["text"] for r in b], q
            assert [r["score"] for r in a] == pytest.approx([r["score"] for r in b], rel=1e-9)
