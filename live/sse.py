"""Server-Sent Events framing of a turn's events (docs/live.md#the-wire-format)."""

from __future__ import annotations

__all__ = ["KEEPALIVE", "format_retry", "format_sse"]

#: A comment line: keeps proxies and clients from timing a quiet stream out.
KEEPALIVE = b": keep-alive\n\n"

# JSON leaves these raw inside strings, and line-splitting clients (Python's
# `str.splitlines()`, httpx `iter_lines`) end a line at each: escaped, every
# client reads every event (docs/live.md#the-wire-format).
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def format_sse(seq: int, event: str, data: str) -> bytes:
    """One SSE frame: `id: <seq>`, `event: <name>`, `data: <json>` on one line (docs/live.md#the-wire-format).

    `data` is the event's JSON text as stored; U+2028, U+2029 and U+0085 in
    it are written as JSON escapes (JSON has no other raw line break).
    """
    return f"id: {seq}\nevent: {event}\ndata: {data.translate(_LINE_BREAKS)}\n\n".encode()


def format_retry(milliseconds: int) -> bytes:
    """The `retry:` field, sent once at the start of each stream: how long an EventSource waits to reconnect."""
    return f"retry: {milliseconds}\n\n".encode()
