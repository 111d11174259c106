"""The tracing tests' fixture, for every test under tests/telemetry/: the spans this
process records, in the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from telemetry import tracing


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span this process records during the test, in the SDK's in-memory exporter (the web's, in the
    test's thread, and the embedded worker's, in its threads)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with tracing.using(provider):
        yield exporter
    provider.shutdown()
