"""Spans of the OpenTelemetry GenAI semantic conventions (docs/metrics.md#traces): a model request (`chat
{model}`, with what its final message says: model, id, token usage, finish reason) and a tool call
(`execute_tool {name}`). Nothing of a request's or a message's content is set: no question, answer, tool
input or output."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from telemetry.tracing import span

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = ["TOOL_ERROR", "TOOL_OK", "TOOL_RAISED", "model_request_span", "model_response", "tool_call_span"]


@contextlib.contextmanager
def model_request_span(
    *, model: str, max_tokens: int, error_type: Callable[[BaseException], str]
) -> Iterator[Span | None]:
    """A CLIENT span `chat {model}` around one Messages API request (the SDK's retries and reading its stream
    included); `model_response` adds what the final message says."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.system": "anthropic",  # the name before gen_ai.provider.name, which older backends still read
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": max_tokens,
    }
    with span(f"chat {model}", kind="client", attributes=attributes, error_type=error_type) as current:
        yield current


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def model_response(current: Span | None, message: Mapping[str, Any]) -> None:
    """Set on a `chat` span what a step's final message (as far as it came) says: the model that answered, the
    message id, the token usage and the stop reason; nothing of its content.

    `gen_ai.usage.input_tokens` counts every input token, the cache's reads
    and writes included, as the conventions ask; those two are also given
    apart (`gen_ai.usage.cache_read.input_tokens`, `..cache_creation..`).
    """
    if current is None:
        return
    attributes: dict[str, Any] = {}
    for key, attribute in (("model", "gen_ai.response.model"), ("id", "gen_ai.response.id")):
        if isinstance(message.get(key), str):
            attributes[attribute] = message[key]
    usage = message.get("usage")
    if isinstance(usage, Mapping):
        read, written = _count(usage.get("cache_read_input_tokens")), _count(usage.get("cache_creation_input_tokens"))
        if read is not None:
            attributes["gen_ai.usage.cache_read.input_tokens"] = read
        if written is not None:
            attributes["gen_ai.usage.cache_creation.input_tokens"] = written
        if (uncached := _count(usage.get("input_tokens"))) is not None:
            attributes["gen_ai.usage.input_tokens"] = uncached + (read or 0) + (written or 0)
        if (output := _count(usage.get("output_tokens"))) is not None:
            attributes["gen_ai.usage.output_tokens"] = output
    if isinstance(message.get("stop_reason"), str):
        attributes["gen_ai.response.finish_reasons"] = (message["stop_reason"],)
    current.set_attributes(attributes)


#: A tool call's outcome (`silvia.tool.outcome`), as `silvia_tool_calls_total` counts it.
TOOL_OK, TOOL_ERROR, TOOL_RAISED = "ok", "tool_error", "error"


@contextlib.contextmanager
def tool_call_span(*, name: str, refused: type[BaseException]) -> Iterator[None]:
    """An INTERNAL span `execute_tool {name}` around one tool call, with `silvia.tool.outcome`: `ok`,
    `tool_error` (it raised `refused`: the tool said no, with a reason for the model) or `error` (anything
    else raised); both errors set status ERROR, `error.type` `tool_error` or the exception's class."""
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "function"}

    def error_type(error: BaseException) -> str:
        return TOOL_ERROR if isinstance(error, refused) else type(error).__name__

    with span(f"execute_tool {name}", attributes=attributes, error_type=error_type) as current:
        outcome = TOOL_RAISED
        try:
            yield
            outcome = TOOL_OK
        except refused:
            outcome = TOOL_ERROR
            raise
        finally:
            if current is not None:
                current.set_attribute("silvia.tool.outcome", outcome)
