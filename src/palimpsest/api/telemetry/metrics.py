"""The service's Prometheus metrics, on a registry of their own (one per app).

Names follow Prometheus conventions (``snake_case``, unit suffixes, ``_total`` for counters);
labels are of low cardinality only — the route *template*, the method, the status class —
never a memory, record or member id. What is counted:

- every HTTP request: ``palimpsest_http_requests_total`` and the latency histogram
  ``palimpsest_http_request_duration_seconds`` (method, route, status class), and the number in
  flight;
- answered recalls (recall, named and free queries) and accepted writes by kind, as seen at
  the HTTP edge (MCP tool calls at ``/mcp`` count as requests to ``/mcp`` only);
- the size of each group commit of concurrent ``remember`` calls;
- the credential cache: hits answer a request without a trip to the store;
- which worker process answered (``palimpsest_worker_info``, ``0`` for the only one): under
  ``pal serve --workers N`` each worker counts only the requests it answered.

This module knows nothing of ASGI: :mod:`.middleware` feeds it.
"""

from __future__ import annotations

from importlib import metadata
from typing import Final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)

LATENCY_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                          5.0, 10.0)
GROUP_BUCKETS: Final = (1, 2, 4, 8, 16, 32)

# Route templates whose 2xx answer is a recall (search_memory).
RECALLS: Final = frozenset({
    ("POST", "/v1/memories/{memory_id}/recall"),
    ("POST", "/v1/memories/{memory_id}/queries/{name}"),
    ("POST", "/v1/memories/{memory_id}/query"),
})

# Write routes by kind (anything else that is not a GET and changes state is "other").
WRITES: Final = {
    ("POST", "/v1/memories/{memory_id}/records"): "remember",
    ("PATCH", "/v1/memories/{memory_id}/records/{record_id}"): "revise",
    ("DELETE", "/v1/memories/{memory_id}/records/{record_id}"): "forget",
    ("POST", "/v1/memories/{memory_id}/erase"): "erase",
    ("POST", "/v1/memories/{memory_id}/observe"): "observe",
    ("POST", "/v1/memories"): "memory",
    ("PUT", "/v1/memories/{memory_id}"): "memory",
    ("DELETE", "/v1/memories/{memory_id}"): "memory",
    ("POST", "/v1/memories/{memory_id}/grants"): "grant",
    ("DELETE", "/v1/memories/{memory_id}/grants/{grant_id}"): "grant",
    ("POST", "/v1/files"): "file",
}
# POST routes that read (they take a body but change nothing).
READS: Final = frozenset({
    ("POST", "/v1/memories/{memory_id}/graph"),
    ("POST", "/api/memory/changesets/{changeset_id}/diff"),
    ("POST", "/api/memory/{project}/conflicts/detect"),
    ("POST", "/api/memory/proposals/{proposal_id}/authorize"),
    ("POST", "/mcp"),
}) | RECALLS


def status_class(status: int) -> str:
    """``2xx``, ``4xx``, … (one label value per class)."""
    return f"{status // 100}xx"


def write_kind(method: str, route: str) -> str | None:
    """The kind of write a request to ``route`` is, or ``None`` for a read."""
    if method in ("GET", "HEAD", "OPTIONS") or (method, route) in READS:
        return None
    kind = WRITES.get((method, route))
    if kind is not None:
        return kind
    return "memory_git" if route.startswith("/api/memory/") else "other"


class Metrics:
    """Every metric of one app, on its own registry."""

    def __init__(self, *, worker: int = 0) -> None:
        # no `_created` twin of every series (a process-wide choice of prometheus-client)
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        ProcessCollector(registry=r)
        labels = ("method", "route", "status_class")
        self.requests = Counter("palimpsest_http_requests_total",
                                "HTTP requests answered, by route template and status class",
                                labels, registry=r)
        self.latency = Histogram("palimpsest_http_request_duration_seconds",
                                 "Time from request to the end of its answer", labels,
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.in_flight = Gauge("palimpsest_http_requests_in_flight",
                               "HTTP requests being answered now", registry=r)
        self.recalls = Counter("palimpsest_recalls_total",
                               "Recalls answered (recall, named and free queries)", ("route",),
                               registry=r)
        self.writes = Counter("palimpsest_writes_total",
                              "Writes accepted over HTTP, by kind", ("kind",), registry=r)
        self.group_commit = Histogram("palimpsest_group_commit_size",
                                      "Remember calls committed in one transaction",
                                      buckets=GROUP_BUCKETS, registry=r)
        self.credential_cache = Counter("palimpsest_credential_cache_total",
                                        "Bearer credentials checked, answered from the cache "
                                        "(hit) or by the store (miss)", ("result",), registry=r)
        info = Gauge("palimpsest_build_info", "The running version", ("version",), registry=r)
        info.labels(version=_version()).set(1)
        # pal serve --workers N: each worker process counts only what it answered
        Gauge("palimpsest_worker_info", "Which worker process of the server answered",
              ("worker",), registry=r).labels(worker=str(worker)).set(1)

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered request (and what it did, when it succeeded)."""
        cls = status_class(status)
        self.requests.labels(method, route, cls).inc()
        self.latency.labels(method, route, cls).observe(seconds)
        if cls != "2xx":
            return
        if (method, route) in RECALLS:
            self.recalls.labels(route).inc()
        kind = write_kind(method, route)
        if kind is not None:
            self.writes.labels(kind).inc()

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _version() -> str:
    try:
        return metadata.version("palimpsest")
    except metadata.PackageNotFoundError:
        return "unknown"


__all__ = ["Metrics", "status_class", "write_kind"]
