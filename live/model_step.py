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

A step is `complete` only once `message_stop` arrived after a `message_delta`
gave a stop reason (SPEC 11): a stream that simply ends (a dropped
connection, a proxy that closes a chunked body cleanly, an HTTP 200 whose
body is no event stream) is not an answer, and the turn runner asks again.

A field the model's stream holds in the wrong shape (a citation that is no
object, a null `text`, `partial_json`, `content_block` or `usage`, a bare
`message_start`, a block index out of range) is skipped and counted in
`skipped_fields` by its place (`"citations_delta.citation"`, ...: names of
ours, never what the model wrote); a citation that is no object is also
counted by the assembler as a citation of a type it does not record. Objects
are read with the SDK's `to_dict(warnings=False)`: pydantic's serializer
warnings would quote the value they found (a tool input, an account name)
into the `py.warnings` log.
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
        #: Fields skipped for their shape, by place (`"content_block_start.index"`, ...).
        self.skipped_fields: dict[str, int] = {}
        self._inputs: dict[int, str] = {}
        self._stopped = False

    @property
    def complete(self) -> bool:
        """Whether the stream ended as the API ends a message: `message_stop`, with a stop reason given."""
        return self._stopped and self.message.get("stop_reason") is not None

    def feed(self, event: Any) -> list[StreamEvent]:
        """Handle one raw stream event; unknown event and block types are kept or skipped, never an error."""
        kind = getattr(event, "type", None)
        content: list[dict[str, Any]] = self.message["content"]
        if kind == "message_start":
            message = self._object(getattr(event, "message", None), "message_start.message")
            self.message = {**(message or {}), "type": "message", "role": "assistant", "content": []}
            return self.assembler.start_step()
        if kind == "message_stop":
            self._stopped = True
            return []
        if kind == "message_delta":
            self._message_delta(event)
            return []
        index = self._index(event, kind, len(content) + (kind == "content_block_start"))
        if index is None:
            return []
        if kind == "content_block_start":
            block = self._object(getattr(event, "content_block", None), "content_block_start.content_block")
            if block is None:
                return []
            if index == len(content):
                content.append(block)
            content[index] = block
            if block.get("type") in _TOOL_INPUT_BLOCKS:
                self._inputs[index] = ""
            return self.assembler.block_start(index, block)
        if kind == "content_block_delta":
            return self._delta(content[index], index, getattr(event, "delta", None))
        if kind == "content_block_stop":
            if index in self._inputs:
                self._parse_input(content[index], self._inputs.pop(index))
            return self.assembler.block_stop(index)
        return []

    def finish(self) -> list[StreamEvent]:
        """The step's stream ended: citations still waiting are placed; `message` is final."""
        events = self.assembler.end_step(self.message.get("model"))
        self.message, _ = storable_json(self.message)
        return events

    @property
    def stop_reason(self) -> str | None:
        return self.message.get("stop_reason")

    def _message_delta(self, event: Any) -> None:
        delta = self._object(getattr(event, "delta", None), "message_delta.delta") or {}
        usage = self._object(getattr(event, "usage", None), "message_delta.usage") or {}
        self.message.update({key: value for key, value in delta.items() if value is not None})
        self.message.setdefault("stop_reason", None)
        if not isinstance(self.message["stop_reason"], str | None):
            self._skip("message_delta.delta.stop_reason")
            self.message["stop_reason"] = None  # no stop reason: the step is not complete
        before = self.message.get("usage")
        self.message["usage"] = {
            **(before if isinstance(before, dict) else {}),
            **{k: v for k, v in usage.items() if v is not None},
        }

    def _delta(self, block: dict[str, Any], index: int, delta: Any) -> list[StreamEvent]:
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            text = self._string(delta, "text", "text_delta.text")
            if text is None:
                return []
            block["text"] = block.get("text", "") + text
            return self.assembler.text(index, text)
        if kind == "citations_delta":
            raw = _citation_of(delta)
            citation = self._object(raw, "citations_delta.citation")
            if citation is None:  # counted by the assembler too, as a citation of a type it does not record
                return self.assembler.citation(index, raw)
            block["citations"] = [*(block.get("citations") or []), citation]
            return self.assembler.citation(index, citation)
        if kind == "input_json_delta" and index in self._inputs:
            partial = self._string(delta, "partial_json", "input_json_delta.partial_json")
            if partial is not None:
                self._inputs[index] += partial
        elif kind == "thinking_delta":
            thinking = self._string(delta, "thinking", "thinking_delta.thinking")
            if thinking is not None:
                block["thinking"] = block.get("thinking", "") + thinking
        elif kind == "signature_delta":
            signature = self._string(delta, "signature", "signature_delta.signature")
            if signature is not None:
                block["signature"] = signature
        return []

    def _skip(self, place: str) -> None:
        self.skipped_fields[place] = self.skipped_fields.get(place, 0) + 1

    def _object(self, value: Any, place: str) -> dict[str, Any] | None:
        """`value` as a JSON object (an SDK model through its public `to_dict`), or None, counted at `place`."""
        if hasattr(value, "to_dict"):
            value = value.to_dict(mode="json", warnings=False)
        if isinstance(value, dict):
            return value
        self._skip(place)
        return None

    def _string(self, holder: Any, name: str, place: str) -> str | None:
        value = getattr(holder, name, None)
        if isinstance(value, str):
            return value
        self._skip(place)
        return None

    def _index(self, event: Any, kind: Any, bound: int) -> int | None:
        """A block event's `index` when it names a block of this step (`0 <= index < bound`), else None,
        counted; for another event kind, None."""
        if kind not in ("content_block_start", "content_block_delta", "content_block_stop"):
            return None
        index = getattr(event, "index", None)
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < bound:
            return index
        self._skip(f"{kind}.index")
        return None

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


def _citation_of(delta: Any) -> Any:
    """A `citations_delta`'s citation as the SDK holds it, or None when it has none (read by attribute: the
    field's name is also one of our events', which live/ spells only through `EventName`)."""
    try:
        return delta.citation
    except AttributeError:
        return None


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
