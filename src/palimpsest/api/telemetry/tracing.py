"""Optional OpenTelemetry spans: one server span per request, with the GenAI memory attributes.

Spans are made only when an OpenTelemetry SDK tracer provider is in place — configured by
``pal serve --tracing console|otlp`` (:func:`configure`) or by whoever embeds the app — so a
server without tracing pays nothing. The OpenTelemetry API comes with the ``mcp`` dependency;
the SDK is the optional extra ``palimpsest[otel]``.

Attributes follow the HTTP and GenAI semantic conventions: ``http.request.method``,
``http.route``, ``http.response.status_code``, and for memory operations
``gen_ai.operation.name`` (``search_memory``, ``create_memory``, ``update_memory``,
``delete_memory``, ``create_memory_store``, ``delete_memory_store``),
``gen_ai.memory.store.id`` (the memory) and ``gen_ai.memory.record.id`` (the record). The
query text (``gen_ai.memory.query.text``) is never recorded: it is user text.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

from palimpsest.errors import InvalidInput

# (method, route template) -> gen_ai.operation.name
OPERATIONS: Final = {
    ("POST", "/v1/memories"): "create_memory_store",
    ("DELETE", "/v1/memories/{memory_id}"): "delete_memory_store",
    ("POST", "/v1/memories/{memory_id}/records"): "create_memory",
    ("POST", "/v1/memories/{memory_id}/observe"): "create_memory",
    ("PATCH", "/v1/memories/{memory_id}/records/{record_id}"): "update_memory",
    ("DELETE", "/v1/memories/{memory_id}/records/{record_id}"): "delete_memory",
    ("POST", "/v1/memories/{memory_id}/erase"): "delete_memory",
    ("POST", "/v1/memories/{memory_id}/recall"): "search_memory",
    ("POST", "/v1/memories/{memory_id}/graph"): "search_memory",
    ("POST", "/v1/memories/{memory_id}/queries/{name}"): "search_memory",
    ("POST", "/v1/memories/{memory_id}/query"): "search_memory",
}
EXPORTERS: Final = ("console", "otlp")


def tracer() -> Any | None:
    """The tracer to make spans with, or ``None`` when no SDK provider is configured."""
    try:
        from opentelemetry import trace  # noqa: PLC0415 -- optional at run time
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    except ImportError:
        return None
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        return None
    return trace.get_tracer("palimpsest.api")


def attributes(method: str, route: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The GenAI memory attributes of a request to ``route`` (empty for other routes)."""
    operation = OPERATIONS.get((method, route))
    if operation is None:
        return {}
    out: dict[str, Any] = {"gen_ai.operation.name": operation}
    if isinstance(params.get("memory_id"), str):
        out["gen_ai.memory.store.id"] = params["memory_id"]
    if isinstance(params.get("record_id"), str):
        out["gen_ai.memory.record.id"] = params["record_id"]
    return out


def configure(exporter: str, service_name: str = "palimpsest") -> None:
    """Install an SDK tracer provider exporting to ``exporter`` (``console``: one JSON span
    per line on stderr; ``otlp``: the OTLP/HTTP exporter, configured by the standard
    ``OTEL_EXPORTER_OTLP_*`` variables).

    Raises:
        InvalidInput: the SDK (or the OTLP exporter) is not installed, or an unknown exporter.
    """
    if exporter not in EXPORTERS:
        raise InvalidInput(f"unknown tracing exporter {exporter!r}", code="invalid-config",
                           hint=f"use one of: {', '.join(EXPORTERS)}")
    try:
        from opentelemetry import trace  # noqa: PLC0415
        from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )
    except ImportError as exc:
        raise InvalidInput("tracing needs the OpenTelemetry SDK", code="tracing-unavailable",
                           hint="pip install 'palimpsest[otel]'") from exc
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if exporter == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
            out=sys.stderr, formatter=lambda span: span.to_json(indent=None) + "\n")))
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter,
            )
        except ImportError as exc:
            raise InvalidInput("the otlp exporter is not installed", code="tracing-unavailable",
                               hint="pip install opentelemetry-exporter-otlp-proto-http") from exc
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)


def shutdown() -> None:
    """Flush and stop the configured provider (pending spans are exported)."""
    try:
        from opentelemetry import trace  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    except ImportError:
        return
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.shutdown()


__all__ = ["EXPORTERS", "OPERATIONS", "attributes", "configure", "shutdown", "tracer"]
