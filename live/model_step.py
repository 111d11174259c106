"""One model step of a live turn: the SDK's raw stream events fed to the turn assembler (docs/live.md).

`StepStream.feed(event)` passes each raw Messages API stream event
(`message_start`, `content_block_*`, `message_delta`, ...) to the turn's
`citations.assembler.TurnAssembler` as a delta and returns the events to
send; it also builds the step's final message (what the API would return
unstreamed), which goes back to the model, into the turn record and into
the `message` event.

The stream is read raw: `messages.with_streaming_response.create(stream=True)`,
the SDK's documented interface to the HTTP response (its request, headers,
retries and errors as for any call), and `read(body)` takes the response's
bytes (`APIResponse.iter_bytes()`) as the Messages API's server-sent events,
each event's `data` parsed once with orjson into the JSON object the API sent.
Why not the SDK's event objects (`messages.create(stream=True)`): building a
pydantic model for every event, and our `to_dict` of it, was about a quarter
of a turn's worker CPU (issue 36, bench/README.md#cpu-per-turn-issue-36), and
the `messages.stream()` helper's accumulator parses each tool input with jiter
as it arrives, so a lone surrogate in the input makes it raise a ValueError
that quotes the whole input (account ids included) and ends the stream. Here a
tool input is parsed once, when its block ends, with the stdlib; an input that
is no JSON object or holds a NUL or a lone surrogate becomes an `is_error`
tool result (docs/live.md#failures) and the turn goes on. Everything else is
copied as the SDK does: block dicts as sent, text appended, citations listed,
`message_delta` setting the stop reason and the cumulative usage. Events are
read as the SDK reads them: by their SSE `event:` name, `ping` and nameless
ones skipped, `error` ending the step as the failure its type names
(`live.errors.failure_from_error_event`).

A step is `complete` only once `message_stop` arrived after a `message_delta`
gave a stop reason (SPEC 11): a stream that simply ends (a dropped
connection, a proxy that closes a chunked body cleanly, an HTTP 200 whose
body is no event stream) is not an answer, and the turn runner asks again.

A field the model's stream holds in the wrong shape (a citation that is no
object, a null `text`, `partial_json`, `content_block` or `usage`, a bare
`message_start`, a block index out of range) is skipped and counted in
`skipped_fields` by its place (`"citations_delta.citation"`, ...: names of
ours, never what the model wrote); a citation that is no object is also
counted by the assembler as a citation of a type it does not record; an
event whose `data` is no JSON object is skipped as `event.data`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from anthropic.types import CitationsDelta

from citations.assembler import TurnAssembler
from citations.live_events import StreamEvent
from citations.text import storable_json, text_problem
from live.errors import failure_from_error_event

__all__ = ["MAX_TOKENS", "PAUSE_TURN", "TOOL_USE", "StepStream", "tool_use_cut_off"]

TOOL_USE, PAUSE_TURN, MAX_TOKENS = "tool_use", "pause_turn", "max_tokens"
_TOOL_INPUT_BLOCKS = ("tool_use", "server_tool_use")
#: The `citations_delta` field that holds the citation, as the SDK's type declares it (the word is also one of
#: our events' names, which live/ spells only through `EventName`).
_CITATION_FIELD = next(name for name in CitationsDelta.model_fields if name != "type")
#: SSE events the SDK skips: a keep-alive, and none of the Messages API's.
_SKIPPED_EVENTS = ("ping", "")


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

    def read(self, body: Iterable[bytes]) -> Iterator[StreamEvent]:
        """Read a Messages API event stream (SPEC 11), `body` its bytes as they come (`APIResponse.iter_bytes()`),
        and `feed` each event's `data`; yields the events to send, as they come (text offsets as the assembler
        counts them, UTF-16 code units).

        Server-sent events (the WHATWG format): lines end at CRLF, LF or CR and nowhere else (not at U+2028
        or a form feed, which a text may hold: why not `iter_lines`, which splits there too); `event:` and
        `data:` fields, a blank line ends an event, a `data` of several lines is joined by newlines, an event
        the stream's end cuts off is dropped. As the SDK: an event with no name, and `ping`, are skipped;
        `error` raises `TurnFailure` (its type's kind, `live.errors.failure_from_error_event`). Raises what
        reading `body` raises (a dropped connection).
        """
        name, data = "", []  # type: tuple[str, list[str]]
        for line in _lines(body):
            if line:
                field, _, value = line.partition(":")
                value = value[1:] if value[:1] == " " else value
                if field == "event":
                    name = value
                elif field == "data":
                    data.append(value)
                continue
            if data and name not in _SKIPPED_EVENTS:
                yield from self._event(name, "\n".join(data))
            name, data = "", []

    def _event(self, name: str, data: str) -> list[StreamEvent]:
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:  # also an escaped lone surrogate, which the stdlib reads (text replaces it)
            try:
                event = json.loads(data)
            except ValueError:
                event = None
        if name == "error":
            raise failure_from_error_event(event)
        if not isinstance(event, dict):
            self._skip("event.data")
            return []
        return self.feed(event)

    def feed(self, event: dict[str, Any]) -> list[StreamEvent]:
        """Handle one stream event (its `data`, a JSON object); unknown event and block types are kept or
        skipped, never an error."""
        kind = event.get("type")
        content: list[dict[str, Any]] = self.message["content"]
        if kind == "message_start":
            message = self._object(event.get("message"), "message_start.message")
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
            block = self._object(event.get("content_block"), "content_block_start.content_block")
            if block is None:
                return []
            if index == len(content):
                content.append(block)
            content[index] = block
            if block.get("type") in _TOOL_INPUT_BLOCKS:
                self._inputs[index] = ""
            return self.assembler.block_start(index, block)
        if kind == "content_block_delta":
            delta = self._object(event.get("delta"), "content_block_delta.delta")
            return [] if delta is None else self._delta(content[index], index, delta)
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

    def _message_delta(self, event: dict[str, Any]) -> None:
        delta = self._object(event.get("delta"), "message_delta.delta") or {}
        usage = self._object(event.get("usage"), "message_delta.usage") or {}
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

    def _delta(self, block: dict[str, Any], index: int, delta: dict[str, Any]) -> list[StreamEvent]:
        kind = delta.get("type")
        if kind == "text_delta":
            text = self._string(delta, "text", "text_delta.text")
            if text is None:
                return []
            block["text"] = block.get("text", "") + text
            return self.assembler.text(index, text)
        if kind == "citations_delta":
            raw = delta.get(_CITATION_FIELD)
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
        """`value` when it is a JSON object, else None, counted at `place`."""
        if isinstance(value, dict):
            return value
        self._skip(place)
        return None

    def _string(self, holder: dict[str, Any], name: str, place: str) -> str | None:
        value = holder.get(name)
        if isinstance(value, str):
            return value
        self._skip(place)
        return None

    def _index(self, event: dict[str, Any], kind: Any, bound: int) -> int | None:
        """A block event's `index` when it names a block of this step (`0 <= index < bound`), else None,
        counted; for another event kind, None."""
        if kind not in ("content_block_start", "content_block_delta", "content_block_stop"):
            return None
        index = event.get("index")
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


def _lines(body: Iterable[bytes]) -> Iterator[str]:
    """The lines of an event stream's body, without their ends (CRLF, LF or CR: `bytes.splitlines` splits at
    these only), decoded as UTF-8 (an invalid byte becomes U+FFFD). The last line of a chunk waits for the next
    unless it ends with LF (a CR may be the first half of a CRLF); at the body's end a line ended by CR is
    yielded, one with no end dropped (it can end no event)."""
    rest = b""
    for chunk in body:
        lines = (rest + chunk).splitlines(keepends=True)
        rest = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""
        for line in lines:
            yield line.rstrip(b"\r\n").decode("utf-8", "replace")
    if rest.endswith(b"\r"):
        yield rest[:-1].decode("utf-8", "replace")


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
