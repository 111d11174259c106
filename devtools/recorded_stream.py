"""The Messages API's streaming events for a recorded final message, as the API sends them (formats.md 1.4).

`message_events(message)` is what the recorded model (`devtools.recorded_model`) streams for one step.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["RECORDED_MODEL", "message_events", "sse_frame"]

RECORDED_MODEL = "recorded-model-not-claude"
TEXT_CHUNK = 12  # characters per text_delta, about three tokens
JSON_CHUNK = 20  # characters per input_json_delta


def sse_frame(event: str, data: Mapping[str, Any]) -> bytes:
    try:
        return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
    except UnicodeEncodeError:  # a lone surrogate: sent as the API would, a JSON escape (\ud800)
        return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _chunks(text: str, size: int) -> Iterator[str]:
    for i in range(0, len(text), size):
        yield text[i : i + size]


def message_events(message: Mapping[str, Any], *, model: str = RECORDED_MODEL) -> list[tuple[str, dict[str, Any]]]:
    """The stream of events the API sends for a final `message` (docs/live.md, formats.md 1.4).

    `message` is `{"content": [blocks], "stop_reason", "id"?, "usage"?}`.
    Text is sent in `TEXT_CHUNK`-character deltas, then one `citations_delta`
    per citation (a block with `"citations_first": true` sends them first);
    tool inputs as `input_json_delta` chunks (a block's `partial_json`, when
    given, is sent verbatim instead: an input cut off or not valid JSON);
    other blocks (web search results) whole in `content_block_start`.
    """
    msg_id = message.get("id") or f"msg_rec_{uuid.uuid4().hex[:20]}"
    usage = message.get("usage") or {"input_tokens": 100, "output_tokens": 1}
    start = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": message.get("model", model),
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    output_tokens = 0
    for index, block in enumerate(message.get("content", [])):
        kind = block.get("type")
        if kind == "text":
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            cites = [
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "citations_delta", "citation": c},
                    },
                )
                for c in block.get("citations") or []
            ]
            texts = [
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}},
                )
                for piece in _chunks(block.get("text", ""), TEXT_CHUNK)
            ]
            output_tokens += len(texts)
            events.extend(cites + texts if block.get("citations_first") else texts + cites)
        elif kind in ("tool_use", "server_tool_use"):
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": kind, "id": block["id"], "name": block["name"], "input": {}},
                    },
                )
            )
            events.extend(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
                for piece in _chunks(
                    block["partial_json"] if "partial_json" in block else json.dumps(block.get("input", {})),
                    JSON_CHUNK,
                )
            )
        else:
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message.get("stop_reason", "end_turn"), "stop_sequence": None},
                "usage": {"output_tokens": max(output_tokens, 1)},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events
