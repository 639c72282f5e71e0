"""Traces: OpenTelemetry spans when tracing is on, and nothing at all (not even an import) when it is off.

Tracing is on in a process once `setup()` found either a tracer provider its host set (the Hermes plugin in a
traced Hermes, a test) or the standard variables asking for an exporter (`OTEL_TRACES_EXPORTER`, or an
`OTEL_EXPORTER_OTLP_*ENDPOINT`) with the OpenTelemetry SDK installed (the `otel` extra:
`pip install '<Backchannel's folder or wheel>[otel]'`).
Off, every helper here returns at once, so the turn path pays one function call.

A span's context crosses processes as W3C `traceparent`/`tracestate` (HTTP headers, MCP's `_meta`) and is kept
in the store with each run as a `Carrier`, so a queued run, a wake-up, an approval and a turn run again after a
restart continue the trace they belong to. A caller's context is only ever a parent: it names nobody.

What was said stays out of spans unless `traces.content` is on (`set_content_chars`): message and reply text, and
an error's message and traceback (they quote what was said, a model server's answer, paths of the home). An error
is always its class and code (`error.type`, an `exception` event with `exception.type` alone, status ERROR).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import BackchannelError

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Status, Tracer, TraceState

log = logging.getLogger("backchannel.tracing")

TRACER_NAME = "backchannel"
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
MAX_TRACESTATE_CHARS = 512  # W3C: a vendor may drop a longer one; we do
_TRACEPARENT_RE = re.compile(r"\A00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})\Z")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
_EXPORTER_GROUP = "opentelemetry_traces_exporter"
_OTLP_BY_PROTOCOL = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http", "http/json": "otlp_proto_http"}
# The SDK's own loggers of a failed export: one line of ours says it instead (see _Quiet).
_NOISY_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.sdk.trace.export",
)


class Carrier(NamedTuple):
    """A span's context as W3C puts it on the wire and the store keeps it: `traceparent` and `tracestate`."""

    traceparent: str
    tracestate: str = ""


class _State:
    on = False
    decided = False
    content_chars = 0  # message text in attributes: 0 never (`traces.content` in config.yaml), else up to this
    lock = threading.Lock()


_state = _State()


def active() -> bool:
    """Whether spans are recorded in this process (decided by `setup`)."""
    return _state.on


def setup(*, service: str = "backchannel", attributes: Mapping[str, str] | None = None) -> bool:
    """Turn tracing on for this process when its host or the OTEL_* variables ask for it; True when on.

    Decided once per process; a provider is built only when none is set yet (never over a host's own).
    `service` names the process where OTEL_SERVICE_NAME does not; `attributes` join the resource."""
    with _state.lock:
        if _state.decided:
            return _state.on
        _state.decided = True
        _state.on = _decide(service, dict(attributes or {}))
        return _state.on


def set_content_chars(chars: int) -> None:
    """Message and reply text go into spans up to `chars` characters each (0: never, the default)."""
    _state.content_chars = max(0, chars)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _wanted_exporters() -> list[str]:
    """The exporters the OTEL_* variables ask for (none when they ask for nothing)."""
    names = os.environ.get("OTEL_TRACES_EXPORTER")
    if names is None:
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        return ["otlp"] if endpoint else []
    return [n.strip().lower() for n in names.split(",") if n.strip() and n.strip().lower() != "none"]


def _decide(service: str, attributes: dict[str, str]) -> bool:
    if _truthy(os.environ.get("OTEL_SDK_DISABLED")):
        return False
    wanted = _wanted_exporters()
    if not wanted and "opentelemetry.trace" not in sys.modules:
        return False  # nothing asks for traces, and no host could have set a provider: never import the API
    from opentelemetry import trace

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return True  # the host (or a test) set one: its spans are ours too
    if not wanted:
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "OTEL_TRACES_EXPORTER or an OTLP endpoint is set, but the OpenTelemetry SDK is not installed: "
            "no traces are sent (install the otel extra: pip install '<Backchannel's folder or wheel>[otel]')"
        )
        return False
    exporters = [e for e in (_exporter(name) for name in wanted) if e is not None]
    if not exporters:
        return False
    named = "service.name" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "") or os.environ.get("OTEL_SERVICE_NAME")
    resource = Resource.create({**attributes, **({} if named else {"service.name": service})})
    provider = TracerProvider(resource=resource)  # its sampler from OTEL_TRACES_SAMPLER(_ARG)
    for exporter in exporters:
        # Spans are handed to a bounded queue (OTEL_BSP_MAX_QUEUE_SIZE) and sent from a thread of their own:
        # an exporter that is down or slow drops spans, never slows a turn.
        provider.add_span_processor(BatchSpanProcessor(exporter))
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).addFilter(_drop_export_noise)
    trace.set_tracer_provider(provider)
    return True


def _exporter(name: str) -> SpanExporter | None:
    """The exporter OTEL_TRACES_EXPORTER names (`otlp` by OTEL_EXPORTER_OTLP_PROTOCOL), from the installed ones."""
    from importlib.metadata import entry_points

    point = name
    if name == "otlp":
        protocol = (
            os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        )
        point = _OTLP_BY_PROTOCOL.get(protocol.strip().lower(), "")
        if not point:
            known = ", ".join(_OTLP_BY_PROTOCOL)
            log.warning("OTEL_EXPORTER_OTLP_PROTOCOL %r is not one of %s: no traces sent", protocol, known)
            return None
    found = {e.name: e for e in entry_points(group=_EXPORTER_GROUP)}
    if point not in found:
        log.warning(
            "trace exporter %r is not installed (installed: %s): no traces sent there",
            name,
            ", ".join(sorted(n for n in found if n != "otlp")) or "none",
        )
        return None
    try:
        exporter = found[point].load()()
    except Exception as exc:  # a bad endpoint or header variable: the gateway runs on without traces there
        log.warning("trace exporter %r could not be made: %s", name, exc)
        return None
    return _Quiet(exporter, name)


def _drop_export_noise(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.CRITICAL


def _Quiet(inner: SpanExporter, name: str) -> SpanExporter:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Quiet(SpanExporter):
        """An exporter that says once that its endpoint is away (and once that it is back), not per batch."""

        def __init__(self) -> None:
            self.failing = False

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            try:
                result = inner.export(spans)
            except Exception as exc:
                result, why = SpanExportResult.FAILURE, f"{type(exc).__name__}: {exc}"
            else:
                why = "it did not accept them"
            if result is SpanExportResult.FAILURE and not self.failing:
                self.failing = True
                log.warning("traces could not be sent to %s (%s): spans are dropped until it answers", name, why)
            elif result is SpanExportResult.SUCCESS and self.failing:
                self.failing = False
                log.warning("traces are sent to %s again", name)
            return result

        def shutdown(self) -> None:
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return inner.force_flush(timeout_millis)

    return Quiet()


# --- spans --------------------------------------------------------------------------------------------


class _Api:
    """The parts of the OpenTelemetry API the spans use, imported once when tracing turns on (an import
    statement per span costs a turn more than the span's own attributes)."""

    def __init__(self) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import (
            NonRecordingSpan,
            SpanContext,
            SpanKind,
            Status,
            StatusCode,
            TraceFlags,
            TraceState,
        )

        self.attach, self.detach, self.current_context = context.attach, context.detach, context.get_current
        self.in_context, self.current_span = trace.set_span_in_context, trace.get_current_span
        self.kinds = {"server": SpanKind.SERVER, "client": SpanKind.CLIENT, "internal": SpanKind.INTERNAL}
        self.tracer = trace.get_tracer(TRACER_NAME)
        self.trace_state = TraceState
        self._status, self._error = Status, StatusCode.ERROR
        self._span, self._context, self._flags = NonRecordingSpan, SpanContext, TraceFlags

    def error(self, why: str | None = None) -> Status:
        return self._status(self._error, why)

    def remote(self, trace_id: int, span_id: int, flags: int, state: TraceState) -> Span:
        """A caller's span, as a parent."""
        flagged = self._flags(flags)
        context = self._context(
            trace_id=trace_id, span_id=span_id, is_remote=True, trace_flags=flagged, trace_state=state
        )
        return self._span(context)


_api: _Api | None = None


def _otel() -> _Api:
    global _api
    if _api is None:
        _api = _Api()
    return _api


def tracer() -> Tracer:
    """Backchannel's tracer, made once."""
    return _otel().tracer


def start(
    name: str,
    *,
    kind: str = "internal",
    attributes: Mapping[str, Any] | None = None,
    parent: Context | None = None,
    at: float | None = None,
) -> Span:
    """A span begun at `at` (epoch seconds; now when None) under `parent` (the current span when None).
    Only call when `active()`."""
    api = _otel()
    return api.tracer.start_span(
        name,
        context=parent,
        kind=api.kinds[kind],
        attributes=_clean(attributes),
        start_time=None if at is None else _ns(at),
    )


class span:  # used as a function: `with tracing.span(...) as s`
    """A span around a block, current inside it; an error leaving the block marks it and ends it. `as` gives the
    span, or None when tracing is off (then nothing at all happens)."""

    __slots__ = ("_args", "_span", "_token")

    def __init__(
        self,
        name: str,
        kind: str = "internal",
        attributes: Mapping[str, Any] | None = None,
        *,
        parent: Context | None = None,
    ) -> None:
        self._args = (name, kind, attributes, parent) if _state.on else None
        self._span: Span | None = None

    def __enter__(self) -> Span | None:
        if self._args is None:
            return None
        name, kind, attributes, parent = self._args
        self._span = start(name, kind=kind, attributes=attributes, parent=parent)
        self._token = _otel().attach(_otel().in_context(self._span))
        return self._span

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: object) -> None:
        s = self._span
        if s is None:
            return
        _otel().detach(self._token)
        if error is not None and not isinstance(error, GeneratorExit):
            _failed(s, error)
        s.end()


def _failed(span: Span, error: BaseException) -> None:
    """`error` ended `span`: its class and code (`error.type`: our code, or the class), status ERROR; its message
    and traceback only when `traces.content` is on."""
    kind = _exception_type(error)
    span.set_attribute("error.type", error.code if isinstance(error, BackchannelError) else kind)
    if _state.content_chars:
        span.record_exception(error)
        span.set_status(_otel().error(f"{type(error).__name__}: {error}"[:200]))
    else:
        span.add_event("exception", {"exception.type": kind})
        span.set_status(_otel().error())


def _exception_type(error: BaseException) -> str:
    """An exception's class as OpenTelemetry's `exception.type` names it (`module.Class`; a builtin's bare)."""
    kind = type(error)
    return kind.__qualname__ if kind.__module__ in ("builtins", "") else f"{kind.__module__}.{kind.__qualname__}"


class _Off:
    """What `span_of` gives while tracing is off: a block with no span (`as` gives None)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_OFF = _Off()


def span_of(
    describe: Callable[..., tuple[str, str, Mapping[str, Any]]], *args: Any, parent: Context | None = None
) -> span | _Off:
    """`span(*describe(*args))`, `describe` called only when tracing is on: a turn with tracing off builds no
    span's name or attributes."""
    if not _state.on:
        return _OFF
    return span(*describe(*args), parent=parent)


class current:  # used as a function: `with tracing.current(span)`
    """`span` current inside the block (its end is the caller's); nothing when None."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Span | None) -> None:
        self._span = span

    def __enter__(self) -> None:
        if self._span is not None:
            self._token = _otel().attach(_otel().in_context(self._span))

    def __exit__(self, *exc: object) -> None:
        if self._span is not None:
            _otel().detach(self._token)


class under:  # used as a function: `with tracing.under(context)`
    """`parent` (a caller's context) current inside the block, with no span of ours: what begins inside it is its
    child; nothing when None."""

    __slots__ = ("_parent", "_token")

    def __init__(self, parent: Context | None) -> None:
        self._parent = parent

    def __enter__(self) -> None:
        if self._parent is not None:
            self._token = _otel().attach(self._parent)

    def __exit__(self, *exc: object) -> None:
        if self._parent is not None:
            _otel().detach(self._token)


def here() -> Context | None:
    """The current context, to parent spans on later from elsewhere (None when tracing is off)."""
    return _otel().current_context() if _state.on else None


def annotate(span: Span | None, attributes: Mapping[str, Any]) -> None:
    """Add `attributes` to `span` (its Nones left out); nothing when tracing is off (`span` None)."""
    if span is not None:
        span.set_attributes(_clean(attributes) or {})


def end(
    span: Span,
    *,
    at: float | None = None,
    error: str | None = None,
    code: str | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> None:
    """End `span` (at `at`, epoch seconds). With `code` (what kind of failure: `error.type`) its status is ERROR,
    described by `error` (what went wrong) only when `traces.content` is on: the words may quote what was said."""
    if attributes:
        annotate(span, attributes)
    if code is not None:
        span.set_attribute("error.type", code)
        span.set_status(_otel().error(error[:200] if error and _state.content_chars else None))
    span.end(end_time=None if at is None else _ns(at))


def whole(
    name: str,
    *,
    start_at: float,
    end_at: float,
    kind: str = "internal",
    attributes: Mapping[str, Any] | None = None,
    parent: Context | None = None,
    error: str | None = None,
    code: str | None = None,
) -> None:
    """A span of something already over (a queue wait, a hold, a refusal): a failure when `code` (see `end`)."""
    s = start(name, kind=kind, attributes=attributes, parent=parent, at=start_at)
    end(s, at=max(end_at, start_at), error=error, code=code)


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def _clean(attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Attributes without the Nones (OpenTelemetry refuses them); sequences as lists of strings."""
    if not attributes:
        return None
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = [str(v) for v in value]
        out[key] = value
    return out


def content(text: str | None) -> str | None:
    """`text` for a span attribute when `traces.content` is on (bounded), else None (left out)."""
    chars = _state.content_chars
    if not chars or text is None:
        return None
    return text if len(text) <= chars else f"{text[:chars]}… ({len(text) - chars} more characters)"


# --- contexts across processes and in the store ------------------------------------------------------


def carrier_of(span: Span | None) -> Carrier | None:
    """The W3C form of `span`'s context (None for an invalid one)."""
    if span is None:
        return None
    sc = span.get_span_context()
    if not sc.is_valid:
        return None
    state = sc.trace_state.to_header() if sc.trace_state else ""
    return Carrier(f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{sc.trace_flags:02x}", state)


def current_carrier() -> Carrier | None:
    """The current span's context in W3C form, when tracing is on and a span is current."""
    if not _state.on:
        return None
    return carrier_of(_otel().current_span())


def parse(traceparent: str | None, tracestate: str | None = None) -> Context | None:
    """A remote parent from a `traceparent` (and `tracestate`); None for a missing, malformed or oversized one
    (a new trace starts: a caller's bad header is never an error)."""
    if not _state.on or not traceparent:
        return None
    found = _TRACEPARENT_RE.match(traceparent.strip().lower()) if len(traceparent) <= 64 else None
    if found is None or found.group(1) == _ZERO_TRACE or found.group(2) == _ZERO_SPAN:
        return None
    api = _otel()
    state = api.trace_state()
    if tracestate and len(tracestate) <= MAX_TRACESTATE_CHARS:
        with contextlib.suppress(Exception):
            state = api.trace_state.from_header([tracestate])
    span = api.remote(int(found.group(1), 16), int(found.group(2), 16), int(found.group(3), 16) & 0x01, state)
    return api.in_context(span)


def kept(traceparent: str | None, tracestate: str | None) -> Carrier | None:
    """A context as the store keeps it (two columns), as a Carrier; None when nothing was kept."""
    return Carrier(traceparent, tracestate or "") if traceparent else None


def from_headers(headers: Mapping[str, str]) -> Context | None:
    """The caller's context from request headers (HTTP's are case-insensitive: pass Starlette's or httpx's)."""
    if not _state.on:
        return None
    return parse(headers.get(TRACEPARENT), headers.get(TRACESTATE))


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current span's `traceparent`/`tracestate` to outgoing headers (nothing when off or none)."""
    carried = current_carrier()
    if carried is None:
        return
    headers[TRACEPARENT] = carried.traceparent
    if carried.tracestate:
        headers[TRACESTATE] = carried.tracestate
