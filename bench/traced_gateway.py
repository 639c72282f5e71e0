"""`backchannel gateway` with tracing on and its spans kept in memory (the last ones only, as a real exporter lets
go of what it sent: the SDK's InMemorySpanExporter keeps every span, and a heap that only grows makes the
collector's passes, not tracing, the cost), behind the SDK's batch processor as a real exporter would sit:
`make bench` measures what tracing costs a turn without an exporter's network in the figures."""

from __future__ import annotations

import collections
import sys
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

KEPT = 1000


class LastSpans(SpanExporter):
    """Keeps the last KEPT spans exported to it, and how many there were."""

    def __init__(self) -> None:
        self.spans: collections.deque[ReadableSpan] = collections.deque(maxlen=KEPT)
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(LastSpans()))
trace.set_tracer_provider(provider)  # set before the gateway starts: it traces into this provider

from backchannel.cli import main  # noqa: E402 - after the provider, as a host that traces would do it

sys.argv = ["backchannel", "gateway", *sys.argv[1:]]
main()
