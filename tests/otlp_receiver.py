"""A real OTLP/HTTP trace receiver on a loopback port: what a collector does with `POST /v1/traces`, decoded with
the OpenTelemetry protocol's own protobuf types, for the traces' tests.

    with OtlpReceiver() as otlp:
        env = otlp.env("alpha")  # OTEL_* variables that send a process's spans here
        ...
        otlp.wait_for(lambda spans: any(s.name == "invoke_agent default" for s in spans))
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

KINDS = {
    ProtoSpan.SPAN_KIND_INTERNAL: "internal",
    ProtoSpan.SPAN_KIND_SERVER: "server",
    ProtoSpan.SPAN_KIND_CLIENT: "client",
    ProtoSpan.SPAN_KIND_PRODUCER: "producer",
    ProtoSpan.SPAN_KIND_CONSUMER: "consumer",
}


@dataclass(frozen=True)
class Span:
    """One span as the receiver got it: ids in hex, its service's name, its attributes as Python values."""

    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    error: bool
    start_ns: int
    end_ns: int
    status_message: str = ""
    events: tuple[tuple[str, dict[str, Any]], ...] = ()  # (name, attributes) of each event, in order

    def __getitem__(self, key: str) -> Any:
        return self.attributes[key]


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: OtlpReceiver


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_response(404)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.owner.take(request)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


class OtlpReceiver:
    """Receives OTLP/HTTP protobuf trace exports on a free loopback port, keeping every span."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._lock = threading.Lock()
        self._spans: list[Span] = []
        self.requests = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self, service: str, **extra: str) -> dict[str, str]:
        """The standard variables that send a process's spans here, promptly (a short batch delay)."""
        return {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_SERVICE_NAME": service,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            **extra,
        }

    def take(self, request: ExportTraceServiceRequest) -> None:
        got: list[Span] = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    got.append(
                        Span(
                            service=str(resource.get("service.name", "")),
                            name=s.name,
                            kind=KINDS.get(s.kind, "unspecified"),
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_id=s.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            error=s.status.code == s.status.STATUS_CODE_ERROR,
                            start_ns=s.start_time_unix_nano,
                            end_ns=s.end_time_unix_nano,
                            status_message=s.status.message,
                            events=tuple((e.name, {a.key: _value(a.value) for a in e.attributes}) for e in s.events),
                        )
                    )
        with self._lock:
            self._spans.extend(got)
            self.requests += 1

    @property
    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)

    def wait_for(self, found: Callable[[list[Span]], bool], what: str, within: float = 30.0) -> list[Span]:
        """The spans received, once `found` holds of them (fails the test after `within` seconds)."""
        deadline = time.monotonic() + within
        while True:
            spans = self.spans
            if found(spans):
                return spans
            if time.monotonic() > deadline:
                shown = "\n".join(f"  {s.service} {s.name} {s.trace_id[:8]} {s.attributes}" for s in spans)
                raise AssertionError(f"{what}: not received within {within}s; received:\n{shown}")
            time.sleep(0.05)

    def __enter__(self) -> Self:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
