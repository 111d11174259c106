"""A live turn as the AI SDK's UI message stream (docs/live.md#the-ai-sdk-stream-protocolai-sdk).

The second representation of a turn's event log, for clients built on the
Vercel AI SDK (`useChat`, `DefaultChatTransport`, `readUIMessageStream`;
`ai` 6, stream header `x-vercel-ai-ui-message-stream: v1`). Sans-IO, as
`citations.assembler` is: `UIMessageStream` is fed the log's events in order,
as `(seq, name, data)`, and returns the chunks to send (JSON objects);
`format_chunk` frames one as SSE, and `DONE_FRAME` ends the stream. Our own
format is untouched: this module only reads the events.

The mapping, in short (the docs' table has it whole):

- `turn` starts the message (`messageId` is the turn id).
- The model's output comes in steps: a step begins with its first text,
  citation or tool call, and ends when the model's output resumes after a
  tool result (or at the turn's end). A `pause_turn` continuation has no tool
  round, so it stays in the same step.
- Text streams into text parts, one per run of text: a citation, a tool call
  or the step's end closes the run, so a `data-citation` part follows the
  text it cites. Joined with nothing, the text parts are the stored answer.
- A citation gives a `source-url` (its target has an http(s) `url`; or, with
  no target, its `source` is one) or `source-document` part the first time
  its source is cited, then a `data-citation` part holding the inline
  citation exactly as stored (`target` included).
- The log-only `tool_call`/`tool_result` events become tool parts.
- `citations_summary` is a `data-citations_summary` part; `message` gives
  nothing; `done` is `finish` (its data the message metadata); `error` is the
  protocol's `error` part, then `finish`.
- Rewinds are applied before sending: events a `rewind` drops are never
  sent. When the dropped events were sent already, a `data-rewind` part says
  so (a client then reconnects; a reconnect replays the turn from its start).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from citations.citable import is_http_url
from citations.live_events import DATA_KEYS, EventName, LogOnlyEventName
from citations.text import storable_json

__all__ = [
    "DONE_FRAME",
    "HEADERS",
    "PROTOCOL",
    "SOURCE_MEDIA_TYPE",
    "TOOL_ERROR_TEXT",
    "Chunk",
    "Row",
    "UIMessageStream",
    "apply_rewinds",
    "finish_reason",
    "format_chunk",
    "source_part",
    "stream_bytes",
]

#: The value of the `protocol` query parameter that asks for this stream.
PROTOCOL = "ai-sdk"

#: The response headers of this stream (the `ai` package's `UI_MESSAGE_STREAM_HEADERS`).
HEADERS: Mapping[str, str] = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "X-Accel-Buffering": "no",
}

#: The last frame of every stream, after `finish`.
DONE_FRAME = b"data: [DONE]\n\n"

#: What a `source-document` part's `mediaType` says: the model cited the text of a `search_result` block.
SOURCE_MEDIA_TYPE = "text/plain"

#: A failed tool call's `errorText`: the reason stays with the model (it can quote the input or rows).
TOOL_ERROR_TEXT = "The tool call failed."

#: One event of the log: its id, name and decoded `data`.
Row = tuple[int, str, Mapping[str, Any]]
#: One UI message chunk (a JSON object).
Chunk = dict[str, Any]

# The Anthropic stop reasons as the AI SDK's finish reasons (as @ai-sdk/anthropic maps them).
_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "refusal": "content-filter",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}

# The `citation` event's one data key (it is spelled as the event is: the name lives in live_events).
(_CITATION_KEY,) = DATA_KEYS[EventName.CITATION] or ()

_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def finish_reason(stop_reason: object) -> str:
    """The `finish` chunk's `finishReason` for a turn's last `stop_reason` (`other` for any it does not know)."""
    return _FINISH_REASONS.get(stop_reason, "other") if isinstance(stop_reason, str) else "other"


def source_part(citation: Mapping[str, Any]) -> Chunk:
    """The `source-url` or `source-document` chunk of an inline citation's source (`sourceId` is the source).

    `source-url` when the citation's target has an http(s) `url` (`web`, a
    library kind with a URL), or when it has no target and its `source` is an
    http(s) URL (as a page's fallback chip links it, docs/pages.md). Any
    other: `source-document`, whose `title` is required (the source stands in
    for a null title).
    """
    source, title, target = citation["source"], citation.get("title"), citation.get("target")
    url = target.get("url") if isinstance(target, Mapping) else source
    if is_http_url(url):
        part: Chunk = {"type": "source-url", "sourceId": source, "url": url}
        if isinstance(title, str):
            part["title"] = title
        return part
    return {
        "type": "source-document",
        "sourceId": source,
        "mediaType": SOURCE_MEDIA_TYPE,
        "title": title if isinstance(title, str) else source,
    }


def _without_rewinds(rows: Iterable[Row], sent: int) -> list[Row]:
    """`rows` with each `rewind` applied: the events after its `to` dropped, and the rewind too, unless it
    drops events up to `sent` (the last id whose chunks went out already): then it stays, to be said."""
    kept: list[Row] = []
    for row in rows:
        if row[1] == EventName.REWIND:
            kept = [held for held in kept if held[0] <= row[2]["to"]]
            if row[2]["to"] < sent:
                kept.append(row)
        else:
            kept.append(row)
    return kept


def apply_rewinds(rows: Iterable[Row]) -> list[Row]:
    """What a client holds once it applies each `rewind` to `rows` (docs/live.md#rewind): the events after its
    `to` dropped, and no rewind left."""
    return _without_rewinds(rows, 0)


class UIMessageStream:
    """The UI message chunks of one turn, fed the turn's log in order.

    `feed(rows)` returns the chunks of the events `rows` (each `rewind` among
    the rows held so far applied first); with `hold=True` it keeps the rows
    for the next call and returns nothing, for a reader of the log that got
    a full page and reads the next at once. Feed a stream that opens on a
    turn its whole backlog before any chunk goes out, so its rewinds apply
    exactly. `ended` turns True once `done` or `error` was fed; then send
    `DONE_FRAME` and close. Events after that, and names it does not know,
    give nothing.
    """

    def __init__(self) -> None:
        self.ended = False
        self._held: list[Row] = []
        self._sent = 0  # the id of the last event that gave chunks
        self._in_step = False
        self._tools_done = False  # a tool result came in this step: the model's next output is a new step
        self._text_id: str | None = None  # the open text part
        self._sources: set[str] = set()
        self._tool_calls: set[str] = set()

    def feed(self, rows: Iterable[Row], *, hold: bool = False) -> list[Chunk]:
        """The chunks of `rows` (and of the rows held before), in order; none when `hold`."""
        self._held.extend(rows)
        if hold:
            return []
        rows, self._held = _without_rewinds(self._held, self._sent), []
        chunks: list[Chunk] = []
        for seq, name, data in rows:
            if self.ended:
                break
            out = self._event(seq, name, data)
            if out:
                self._sent = seq
                chunks += out
        return chunks

    def _event(self, seq: int, name: str, data: Mapping[str, Any]) -> list[Chunk]:
        if name == EventName.TURN:
            return [{"type": "start", "messageId": data["turn_id"], "messageMetadata": dict(data)}]
        if name == EventName.TEXT:
            return self._text(seq, data["text"])
        if name == EventName.CITATION:
            return self._citation(data[_CITATION_KEY])
        if name == LogOnlyEventName.TOOL_CALL:
            out = [*self._open_step(), *self._close_text()]
            self._tool_calls.add(data["id"])
            # Our server ran it: providerExecuted keeps a client's onToolCall from running it again.
            input_part = {"toolCallId": data["id"], "toolName": data["name"], "input": data["input"]}
            return [*out, {"type": "tool-input-available", **input_part, "providerExecuted": True}]
        if name == LogOnlyEventName.TOOL_RESULT:
            if data["id"] not in self._tool_calls:
                return []  # its call was never sent: the AI SDK refuses a result without one
            self._tools_done = True
            if data.get("is_error"):
                return [{"type": "tool-output-error", "toolCallId": data["id"], "errorText": TOOL_ERROR_TEXT}]
            output = {"sources": data["sources"]}
            return [{"type": "tool-output-available", "toolCallId": data["id"], "output": output}]
        if name == EventName.CITATIONS_SUMMARY:
            return [*self._close_step(), {"type": f"data-{name}", "data": data["citations"]}]
        if name == EventName.DONE:
            self.ended = True
            reason = finish_reason(data.get("stop_reason"))
            return [*self._close_step(), {"type": "finish", "finishReason": reason, "messageMetadata": dict(data)}]
        if name == EventName.ERROR:
            self.ended = True
            error = data["error"]
            return [
                *self._close_step(),
                {"type": "error", "errorText": error["message"]},
                {"type": "finish", "finishReason": "error", "messageMetadata": {"error": dict(error)}},
            ]
        if name == EventName.REWIND:  # only one that drops chunks already sent is left to say
            rewind = {"type": f"data-{name}", "data": {"to": data["to"], "answer": data["answer"]}}
            return [*self._close_step(), rewind]
        return []  # `message` (the raw Anthropic message), and names this module does not know

    def _text(self, seq: int, text: str) -> list[Chunk]:
        if not text:
            return []
        out = self._open_step()
        if self._text_id is None:
            self._text_id = f"text-{seq}"  # the id of the run's first event: the same on every replay
            out.append({"type": "text-start", "id": self._text_id})
        return [*out, {"type": "text-delta", "id": self._text_id, "delta": text}]

    def _citation(self, citation: Mapping[str, Any]) -> list[Chunk]:
        out = [*self._open_step(), *self._close_text()]
        if citation["source"] not in self._sources:
            self._sources.add(citation["source"])
            out.append(source_part(citation))
        return [*out, {"type": f"data-{EventName.CITATION}", "data": dict(citation)}]

    def _open_step(self) -> list[Chunk]:
        out = self._close_step() if self._tools_done else []
        if not self._in_step:
            self._in_step = True
            out.append({"type": "start-step"})
        return out

    def _close_text(self) -> list[Chunk]:
        if self._text_id is None:
            return []
        chunk = {"type": "text-end", "id": self._text_id}
        self._text_id = None
        return [chunk]

    def _close_step(self) -> list[Chunk]:
        out = self._close_text()
        if self._in_step:
            out.append({"type": "finish-step"})
        self._in_step = self._tools_done = False
        return out


def format_chunk(chunk: Mapping[str, Any]) -> bytes:
    """One SSE frame, `data: <json>`: compact JSON, non-ASCII kept, U+2028, U+2029 and U+0085 escaped.

    No `id:` and no `event:` line: the AI SDK reads `data` only, and its
    reconnect replays the turn from the start (docs/live.md). A string the
    log could not hold (a lone surrogate) becomes U+FFFD, so this never raises.
    """
    try:
        text = _json(chunk).encode()
    except UnicodeEncodeError:
        text = _json(storable_json(chunk)[0]).encode()
    return b"data: " + text + b"\n\n"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_LINE_BREAKS)


def stream_bytes(rows: Iterable[Row]) -> bytes:
    """The whole stream of a turn's log read at once (a finished turn replayed): its frames, then `[DONE]`."""
    stream = UIMessageStream()
    body = b"".join(format_chunk(chunk) for chunk in stream.feed(rows))
    return body + DONE_FRAME if stream.ended else body
