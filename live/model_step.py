"""One model step of a live turn: the SDK's raw stream events fed to the turn assembler (docs/live.md).

`StepStream.feed(event)` passes each raw Messages API stream event
(`message_start`, `content_block_*`, `message_delta`, ...) to the turn's
`citations.assembler.TurnAssembler` as a delta and returns the events to
send; it also builds the step's final message (what the API would return
unstreamed), which goes back to the model, into the turn record and into
the `message` event.

Why the raw stream (`messages.create(stream=True)`) and not the SDK's
`messages.stream()` helper, whose accumulator builds the final message for
us: that accumulator parses each tool input with jiter as it arrives, and a
lone surrogate in the input makes it raise a ValueError that quotes the
whole input (account ids included) and ends the stream. Here a tool input is
parsed once, when its block ends, with the stdlib; an input that is no JSON
object or holds a NUL or a lone surrogate becomes an `is_error` tool result
(docs/live.md#failures) and the turn goes on. Everything else is copied as
the SDK does: block dicts as sent, text appended, citations listed,
`message_delta` setting the stop reason and the cumulative usage.
"""

from __future__ import annotations

import json
from typing import Any

from citations.assembler import TurnAssembler
from citations.live_events import StreamEvent
from citations.text import storable_json, text_problem

__all__ = ["MAX_TOKENS", "PAUSE_TURN", "TOOL_USE", "StepStream", "tool_use_cut_off"]

TOOL_USE, PAUSE_TURN, MAX_TOKENS = "tool_use", "pause_turn", "max_tokens"
_TOOL_INPUT_BLOCKS = ("tool_use", "server_tool_use")


class StepStream:
    """Feed it one step's raw stream events (`feed`), then `finish()`.

    After `finish()`: `message` is the final message (JSON; a NUL or lone
    surrogate anywhere in it replaced by U+FFFD, so it can be stored),
    `tool_input_problems` maps a `tool_use` id to why its input cannot be
    used (a short fixed reason, never the input).
    """

    def __init__(self, assembler: TurnAssembler) -> None:
        self.assembler = assembler
        self.message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
        self.tool_input_problems: dict[str, str] = {}
        self._inputs: dict[int, str] = {}

    def feed(self, event: Any) -> list[StreamEvent]:
        """Handle one raw stream event; unknown event and block types are kept or skipped, never an error."""
        kind = getattr(event, "type", None)
        content: list[dict[str, Any]] = self.message["content"]
        if kind == "message_start":
            self.message = {**event.message.to_dict(mode="json"), "content": []}
            return self.assembler.start_step()
        if kind == "content_block_start":
            block = event.content_block.to_dict(mode="json")
            while len(content) <= event.index:
                content.append({})
            content[event.index] = block
            if block.get("type") in _TOOL_INPUT_BLOCKS:
                self._inputs[event.index] = ""
            return self.assembler.block_start(event.index, block)
        if kind == "content_block_delta" and event.index < len(content):
            return self._delta(content[event.index], event.index, event.delta)
        if kind == "content_block_stop":
            if event.index in self._inputs and event.index < len(content):
                self._parse_input(content[event.index], self._inputs.pop(event.index))
            return self.assembler.block_stop(event.index)
        if kind == "message_delta":
            delta, usage = event.delta.to_dict(mode="json"), event.usage.to_dict(mode="json")
            self.message.update({key: value for key, value in delta.items() if value is not None})
            self.message.setdefault("stop_reason", None)
            self.message["usage"] = {
                **(self.message.get("usage") or {}),
                **{k: v for k, v in usage.items() if v is not None},
            }
        return []

    def finish(self) -> list[StreamEvent]:
        """The step's stream ended: citations still waiting are placed; `message` is final."""
        events = self.assembler.end_step(self.message.get("model"))
        self.message, _ = storable_json(self.message)
        return events

    @property
    def stop_reason(self) -> str | None:
        return self.message.get("stop_reason")

    def _delta(self, block: dict[str, Any], index: int, delta: Any) -> list[StreamEvent]:
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.text
            return self.assembler.text(index, delta.text)
        if kind == "citations_delta":
            citation = delta.citation.to_dict(mode="json")
            block["citations"] = [*(block.get("citations") or []), citation]
            return self.assembler.citation(index, citation)
        if kind == "input_json_delta" and index in self._inputs:
            self._inputs[index] += delta.partial_json
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.thinking
        elif kind == "signature_delta":
            block["signature"] = delta.signature
        return []

    def _parse_input(self, block: dict[str, Any], raw: str) -> None:
        if not raw.strip():
            return  # no delta: the input given in content_block_start stands
        problem: str | None
        try:
            value = json.loads(raw)  # the stdlib reads lone surrogates; they are refused below
        except ValueError:
            value, problem = {}, "The tool input was not valid JSON."
        else:
            if not isinstance(value, dict):
                value, problem = {}, "The tool input was not a JSON object."
            else:
                problem = _input_problem(value)
        block["input"] = value
        if problem is not None and block.get("type") == "tool_use":
            self.tool_input_problems[str(block.get("id"))] = problem


def _input_problem(value: dict[str, Any]) -> str | None:
    """A fixed reason when a string of the input (a key or a value) holds a NUL or a lone surrogate."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and text_problem(item):
            return "The tool input held a NUL character or a lone UTF-16 surrogate, which is not valid text."
    return None


def tool_use_cut_off(message: dict[str, Any]) -> bool:
    """Whether the step stopped at `max_tokens` inside a `tool_use` (its input is incomplete)."""
    content = message.get("content") or []
    return message.get("stop_reason") == MAX_TOKENS and any(b.get("type") == TOOL_USE for b in content)
