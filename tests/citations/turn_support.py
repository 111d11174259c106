"""What the turn-record tests share (docs/turns.md): a citation and an assistant step as a record's events
hold them."""

from __future__ import annotations

from citations.turn import AssistantEvent


def _cite(
    source="silvia://your-portfolio", cited_text="total: 1", title="Your portfolio", kind="search_result_location"
):
    return {"type": kind, "source": source, "title": title, "cited_text": cited_text}


def _step(*blocks):
    return AssistantEvent({"type": "message", "role": "assistant", "model": "m", "content": list(blocks)})
