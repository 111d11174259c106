"""One model step of a live turn: stream a Messages API response into SSE events.

See docs/turns.md#what-a-turn-stores and docs/live.md.

`StepStreamer` reads the SDK's raw stream events and emits `text` and
`citation` events as they happen. Offsets follow `citations.turn.assemble_turn`
exactly (the stored answer is the steps' text joined with a blank line; a
citation spans the text block that carries it, in UTF-16 code units), so the
streamed citations equal the stored ones by construction; a test replays
every case through both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from citations.registry import TurnRegistry
from citations.turn import citation_source, inline_citation, record_web_search_results, utf16_length

__all__ = ["AnswerPosition", "StepStreamer"]

Emit = Callable[[str, Any], None]


@dataclass
class AnswerPosition:
    """Where the stored answer stands: its UTF-16 length and whether any step had text yet."""

    offset: int = 0
    has_text: bool = False
    inline: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)


class StepStreamer:
    """Feed it the raw events of one step (`feed`), then `finish()`; it calls `emit(event, data)`."""

    def __init__(self, position: AnswerPosition, registry: TurnRegistry, emit: Emit) -> None:
        self.position = position
        self.registry = registry
        self.emit = emit
        self.step_has_text = False
        self.block_start: dict[int, int | None] = {}
        self.block_citations: dict[int, list[dict[str, Any]]] = {}
        # Citations of text-less blocks met before the step's first text: where
        # they sit depends on whether a blank line separates this step.
        self.pending: list[list[dict[str, Any]]] = []

    def feed(self, event: Any) -> None:
        """Handle one SDK stream event (`message_start`, `content_block_*`, ...; helper events are ignored)."""
        kind = event.type
        if kind == "content_block_start":
            block = event.content_block
            if block.type == "text":
                self.block_start[event.index] = None
                self.block_citations[event.index] = []
            elif block.type == "web_search_tool_result":
                record_web_search_results(self.registry, block.to_dict(mode="json"))
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                self._text(event.index, delta.text)
            elif delta.type == "citations_delta":
                self.block_citations.setdefault(event.index, []).append(delta.citation.to_dict(mode="json"))
        elif kind == "content_block_stop" and event.index in self.block_citations:
            citations = self.block_citations.pop(event.index)
            start = self.block_start.pop(event.index, None)
            if start is not None:
                self._cite(citations, start, self.position.offset)
            elif self.step_has_text:
                self._cite(citations, self.position.offset, self.position.offset)
            else:
                self.pending.append(citations)

    def finish(self) -> None:
        """End of the step: place citations still waiting (the step had no text)."""
        for citations in self.pending:
            self._cite(citations, self.position.offset, self.position.offset)
        self.pending.clear()
        self.position.has_text = self.position.has_text or self.step_has_text

    def _text(self, index: int, text: str) -> None:
        if not text:
            return
        if not self.step_has_text:
            self.step_has_text = True
            if self.position.has_text:
                self.emit("text", {"text": "\n\n"})
                self.position.offset += 2
            for citations in self.pending:
                self._cite(citations, self.position.offset, self.position.offset)
            self.pending.clear()
        if self.block_start.get(index) is None:
            self.block_start[index] = self.position.offset
        self.emit("text", {"text": text})
        self.position.offset += utf16_length(text)

    def _cite(self, citations: list[dict[str, Any]], start: int, end: int) -> None:
        for citation in citations:
            source = citation_source(citation)
            if source is None:
                kind = str(citation.get("type"))
                self.position.skipped[kind] = self.position.skipped.get(kind, 0) + 1
                continue
            entry = inline_citation(citation, source, start, end, self.registry)
            self.position.inline.append(entry)
            self.emit("citation", {"citation": entry})
