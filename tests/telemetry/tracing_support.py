"""What the tests of live turns' OpenTelemetry traces share (docs/metrics.md#traces): the task's and the
question's names, span lookups, and what the spans would export, to search for leaked user data."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

TASK = "chat.run_live_turn"
QUESTION = "How much do I owe on my cards?"


def by_name(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((span for span in spans if span.name == name), key=began)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def began(span: ReadableSpan) -> int:
    assert span.start_time is not None
    return span.start_time


def exported_text(spans: list[ReadableSpan]) -> str:
    """Everything the spans would export: names, attributes, events, links, status, resource and scope."""
    parts = []
    for span in spans:
        parts.append(span.name)
        parts.append(repr(dict(span.attributes or {})))
        parts.extend(f"{event.name} {dict(event.attributes or {})!r}" for event in span.events)
        parts.extend(f"{link.context!r} {dict(link.attributes or {})!r}" for link in span.links)
        parts.append(repr(span.status.description))
        parts.append(repr(dict(span.resource.attributes)))
        parts.append(repr(span.instrumentation_scope))
    return "\n".join(parts)


def leaked(text_: str, secrets: list[str]) -> list[str]:
    return sorted({secret for secret in secrets if secret and secret in text_})
