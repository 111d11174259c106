"""The turn assembler: what a turn streams and what it stores, computed once (docs/turns.md#what-a-turn-stores).

`TurnAssembler` is sans-IO (as h11 is for HTTP): it reads no stream and
writes no database. It is fed a turn's model output, either whole (an
import: `tool_call`, `assistant_message`) or as it streams (a live turn:
`start_step`, `block_start`, `text`, `citation`, `block_stop`, `end_step`),
and returns the `text` and `citation` events to send. As it goes it holds
the answer, the inline citations, the summary and the turn's
`TurnRegistry`; `result()` is what the turn stores. A live turn stores
exactly what it streamed because both come from this one object, and an
import of the same turn gives the same result because it feeds the same
methods (`tests/citations/test_assembler_recorded.py` holds the two together).

Rules (docs/turns.md): the answer is the text of the turn's text blocks,
joined with nothing inside a model step and with `"\\n\\n"` between steps (a
step without text adds nothing); a citation spans the text block that
carries it, in UTF-16 code units of the answer, and is complete when its
block ends; it gets the target its source has in the registry at that
moment. `search_result_location` and `web_search_result_location`
citations are recorded; other types are counted in `skipped`, by a name
`skipped_type_name` bounds to an identifier (the model writes it). A NUL or a
lone surrogate in the model's text is replaced by U+FFFD
(`citations.text`), counted in `replaced`.

Each inline citation also gets its `support` (SPEC 15, docs/support.md,
`citations.support`), computed here once from its span, its `cited_text` and
the texts of the `search_result` blocks this turn's tool calls wrote under
its source, which the assembler holds (`SourceTexts`) as it holds the
registry. The summary (`citations`) carries no `support`.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from citations.citable import SearchResult, to_citable_content
from citations.cited_blocks import citation_source, web_search_result_urls
from citations.live_events import StreamEvent, citation_event, text_event
from citations.registry import TurnRegistry
from citations.support import UNCHECKED_SUPPORT, SourceText, citation_support
from citations.targets import WebTarget
from citations.text import storable_json, storable_text
from citations.turn import WEB_SEARCH_RESULT_LOCATION, AssistantEvent, Event, ToolCallEvent
from citations.utf16 import utf16_length

__all__ = [
    "NOT_AN_IDENTIFIER",
    "NOT_AN_OBJECT",
    "AssembledTurn",
    "SourceTexts",
    "TurnAssembler",
    "assemble_record",
    "replay",
    "skipped_type_name",
]

logger = logging.getLogger(__name__)

#: The name a citation that is no JSON object is counted under in `skipped`.
NOT_AN_OBJECT = "<not an object>"
#: The name a citation type that is a string but no identifier is counted under in `skipped`.
NOT_AN_IDENTIFIER = "<not an identifier>"
#: The longest type name `skipped` keeps as written, in characters.
TYPE_NAME_MAX = 64
_IDENTIFIER = re.compile(rf"[A-Za-z][A-Za-z0-9_.-]{{0,{TYPE_NAME_MAX - 1}}}", re.ASCII)


def skipped_type_name(value: object) -> str:
    """The name a skipped citation's `type` is counted and logged under: an identifier, bounded.

    The model writes this field, and it reaches `skipped_citations` (the `done` event, the stored row's
    count, an INFO log line), so only an identifier passes as written: a letter, then up to
    `TYPE_NAME_MAX` - 1 letters, digits, `_`, `-` or `.` (`char_location`, `page_location`, ...). Any other
    string is `<not an identifier>` (a newline could forge a log line, free text could quote an account),
    and a type that is no string `<null>`, `<number>`, ... (issue 38).
    """
    if not isinstance(value, str):
        kind = {type(None): "null", bool: "boolean", int: "number", float: "number", list: "array", dict: "object"}
        return f"<{kind.get(type(value), 'other')}>"
    return value if _IDENTIFIER.fullmatch(value) else NOT_AN_IDENTIFIER


@dataclass(frozen=True, slots=True)
class AssembledTurn:
    """What one turn stores (docs/turns.md).

    `response` is the answer text; `citations` the summary (one entry per
    distinct `(source, cited_text)`), `inline_citations` one entry per citation
    with `start`/`end` in UTF-16 code units of `response` (end exclusive) and
    its `support` (docs/support.md);
    `model` the model of the last step that names one ("" when none does);
    `skipped_citations` counts, by type, the citations of a type that is not
    recorded (`char_location`, ...), in first-seen order.
    """

    response: str
    citations: list[dict[str, Any]]
    inline_citations: list[dict[str, Any]]
    model: str
    skipped_citations: dict[str, int] = field(default_factory=dict)


class SourceTexts:
    """The texts of the `search_result` blocks a turn's tool calls wrote, by source, in the order written.

    What a citation's support is checked against (docs/support.md). Blocks
    are immutable once written: a copy (`copy.deepcopy`, as
    `TurnAssembler.copy` makes one before each model step) shares them.
    """

    def __init__(self) -> None:
        self._blocks: dict[str, list[SourceText]] = {}

    def add(self, blocks: Iterable[SearchResult]) -> None:
        """Hold `blocks`' texts under their sources (a SQL block's rows are rendered when first cited)."""
        for block in blocks:
            self._blocks.setdefault(block.source, []).append(SourceText(block.text_sequence))

    def add_tool_results(self, messages: Iterable[object]) -> None:
        """Hold the `search_result` blocks of each `tool_result` in `messages` (a checkpoint's Messages API
        messages), in order: the texts exactly as the model was sent them. Anything else is passed over."""
        for message in messages:
            content = message.get("content") if isinstance(message, Mapping) else None
            if not (isinstance(message, Mapping) and message.get("role") == "user" and isinstance(content, list)):
                continue
            for result in content:
                blocks = result.get("content") if isinstance(result, Mapping) else None
                if not (
                    isinstance(result, Mapping) and result.get("type") == "tool_result" and isinstance(blocks, list)
                ):
                    continue
                for block in blocks:
                    if isinstance(block, Mapping) and block.get("type") == "search_result":
                        self._add_block(block)

    def _add_block(self, block: Mapping[str, Any]) -> None:
        source, content = block.get("source"), block.get("content")
        if not (isinstance(source, str) and isinstance(content, list)):
            return
        texts = [item["text"] for item in content if isinstance(item, Mapping) and isinstance(item.get("text"), str)]
        self._blocks.setdefault(source, []).append(SourceText(texts))

    def blocks(self, source: str) -> Sequence[SourceText]:
        """The blocks written under `source`, in order (none when no tool call of the turn returned it)."""
        return self._blocks.get(source, ())

    def __deepcopy__(self, memo: dict[int, Any]) -> SourceTexts:
        clone = SourceTexts()
        clone._blocks = {source: list(blocks) for source, blocks in self._blocks.items()}
        return clone


@dataclass
class _Step:
    """The model step being fed: where each open text block starts and the citations it carries."""

    has_text: bool = False
    starts: dict[int, int | None] = field(default_factory=dict)
    # Where each open text block's text begins in the assembler's list of texts: its span, for support.
    first_texts: dict[int, int] = field(default_factory=dict)
    citations: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    # Citations of text-less blocks met before the step's first text: where
    # they sit depends on whether a blank line separates this step.
    pending: list[list[dict[str, Any]]] = field(default_factory=list)


class TurnAssembler:
    """One turn's answer, citations and registry, fed block by block or delta by delta.

    Every feeding method returns the events to send, in order (`text` and
    `citation` `StreamEvent`s). `registry` may be a resumed one
    (docs/registry.md#checkpoints).
    """

    def __init__(self, registry: TurnRegistry | None = None) -> None:
        self.registry = registry if registry is not None else TurnRegistry()
        self.sources = SourceTexts()
        self._texts: list[str] = []
        self.offset = 0  # UTF-16 length of the answer so far
        self.inline: list[dict[str, Any]] = []
        self._summary: dict[tuple[str, str], dict[str, Any]] = {}
        self.skipped: dict[str, int] = {}
        self.model = ""
        self.replaced = 0
        self._step: _Step | None = None

    # --- whole blocks (an import) ---------------------------------------------

    def tool_call(self, name: str, tool_input: Mapping[str, Any], output: Mapping[str, Any]) -> list[SearchResult]:
        """Write a tool call's blocks to the registry and `sources`; the `search_result` blocks for the model."""
        blocks = to_citable_content(name, tool_input, output)
        for block in blocks:
            self.registry.record(block.source, block.target)
        self.sources.add(blocks)
        return blocks

    def tool_sources(self, blocks: Iterable[SearchResult]) -> list[dict[str, Any]]:
        """The `sources` of a `tool_result` event (docs/live.md#log-only-events), after `tool_call(...)` wrote `blocks`.

        `{"source", "title", "target"?}` per block, in order; `target` is the
        one the registry holds for the source now (pooled, or none once the
        source became untyped), the target a citation made next carries.
        """
        sources = []
        for block in blocks:
            entry: dict[str, Any] = {"source": block.source, "title": block.title}
            target = self.registry.target_for(block.source)
            if target is not None:
                entry["target"] = target.to_json()
            sources.append(entry)
        return sources

    def assistant_message(self, message: Mapping[str, Any]) -> list[StreamEvent]:
        """Feed one model step whole: a Messages API response object (its `content` and `model`)."""
        events = self.start_step()
        for index, block in enumerate(message.get("content") or ()):
            if block.get("type") == "text":
                events += self.block_start(index, {"type": "text", "text": ""})
                events += self.text(index, block.get("text") or "")
                for citation in block.get("citations") or ():
                    events += self.citation(index, citation)
            else:
                events += self.block_start(index, block)
            events += self.block_stop(index)
        return events + self.end_step(message.get("model"))

    # --- deltas (a live turn) -------------------------------------------------

    def start_step(self) -> list[StreamEvent]:
        """A model step begins (`message_start`)."""
        self._step = _Step()
        return []

    def block_start(self, index: int, block: Mapping[str, Any]) -> list[StreamEvent]:
        """A content block begins (`content_block_start`); a web search result writes its URLs as `web`."""
        step = self._current()
        kind = block.get("type")
        if kind == "text":
            step.starts[index] = None
            step.citations[index] = []
        elif kind == "web_search_tool_result":
            for url in web_search_result_urls(block):
                url, self.replaced = _count(storable_text(url), self.replaced)
                self.registry.record(url, WebTarget(url))
        return []

    def text(self, index: int, text: str) -> list[StreamEvent]:
        """A piece of text block `index` (`text_delta`)."""
        text, self.replaced = _count(storable_text(text), self.replaced)
        if not text:
            return []
        step = self._current()
        events = []
        if not step.has_text:
            step.has_text = True
            if self._texts:
                events.append(self._add_text("\n\n"))
            for citations in step.pending:
                events += self._cite(citations, self.offset, self.offset)
            step.pending.clear()
        if step.starts.get(index) is None:
            step.starts[index] = self.offset
            step.first_texts[index] = len(self._texts)
        events.append(self._add_text(text))
        return events

    def citation(self, index: int, citation: object) -> list[StreamEvent]:
        """A citation of text block `index` (`citations_delta`); it is sent when the block ends. One that is no
        JSON object is counted in `skipped` (as `<not an object>`), as a citation of a type not recorded is."""
        if not isinstance(citation, Mapping):
            self.skipped[NOT_AN_OBJECT] = self.skipped.get(NOT_AN_OBJECT, 0) + 1
            return []
        self._current().citations.setdefault(index, []).append(dict(citation))
        return []

    def block_stop(self, index: int) -> list[StreamEvent]:
        """Block `index` ends (`content_block_stop`): its citations are complete."""
        step = self._current()
        if index not in step.citations:
            return []
        citations = step.citations.pop(index)
        start = step.starts.pop(index, None)
        if start is not None:
            span = "".join(self._texts[step.first_texts.pop(index) :])
            return self._cite(citations, start, self.offset, span)
        if step.has_text:
            return self._cite(citations, self.offset, self.offset)
        step.pending.append(citations)
        return []

    def end_step(self, model: object = None) -> list[StreamEvent]:
        """The step ends; `model` is its message's `model`. Citations still waiting sit at the answer's end."""
        step = self._current()
        events: list[StreamEvent] = []
        for citations in step.pending:
            events += self._cite(citations, self.offset, self.offset)
        if isinstance(model, str):
            self.model = model
        self._step = None
        return events

    # --- what the turn stores ---------------------------------------------------

    @property
    def answer(self) -> str:
        """The answer so far: the `text` events joined."""
        return "".join(self._texts)

    def result(self) -> AssembledTurn:
        """What the turn stores, as fed so far."""
        return AssembledTurn(
            response=self.answer,
            citations=[dict(entry) for entry in self._summary.values()],
            inline_citations=list(self.inline),
            model=self.model,
            skipped_citations=dict(self.skipped),
        )

    def copy(self) -> TurnAssembler:
        """An independent copy (registry included), to go back to if a step is retried."""
        return copy.deepcopy(self)

    def snapshot(self) -> dict[str, Any]:
        """The state between two steps as JSON, for a checkpoint (the registry is stored apart).

        `{"answer", "inline", "skipped", "model", "replaced"}`; the summary and
        the offset follow from them. The sources' texts are not in it: they
        are read again from the tool results of the checkpoint's messages
        (`from_snapshot(..., messages=...)`).
        """
        if self._step is not None:
            raise RuntimeError("a snapshot is taken between model steps")
        return {
            "answer": self.answer,
            "inline": self.inline,
            "skipped": self.skipped,
            "model": self.model,
            "replaced": self.replaced,
        }

    @classmethod
    def from_snapshot(
        cls, value: object, registry: TurnRegistry, messages: Iterable[object] = ()
    ) -> TurnAssembler | None:
        """The assembler `snapshot()` saved, with `registry`; None when `value` cannot be read.

        `messages` are the turn's Messages API messages (a checkpoint's
        `messages`): the `search_result` blocks of its tool results are held
        again as the model was sent them, so citations made after the resume
        get the support they would have got (docs/support.md). (Not the
        recorded tool outputs: PostgreSQL's jsonb reorders a row's keys, and
        a SQL row's text follows them when the output names no columns.)
        """
        if not isinstance(value, Mapping):
            return None
        answer, inline, skipped = value.get("answer"), value.get("inline"), value.get("skipped")
        model, replaced = value.get("model"), value.get("replaced", 0)
        if not (
            isinstance(answer, str)
            and isinstance(inline, list)
            and all(_is_inline_entry(entry) for entry in inline)
            and isinstance(skipped, Mapping)
            and all(isinstance(k, str) and isinstance(n, int) for k, n in skipped.items())
            and isinstance(model, str)
            and isinstance(replaced, int)
        ):
            return None
        assembler = cls(registry)
        if answer:
            assembler._texts.append(answer)
        assembler.offset = utf16_length(answer)
        for entry in inline:
            assembler._record(dict(entry))
        assembler.skipped, assembler.model, assembler.replaced = dict(skipped), model, replaced
        assembler.sources.add_tool_results(messages)
        return assembler

    # --- internals --------------------------------------------------------------

    def _current(self) -> _Step:
        if self._step is None:  # a stream without message_start: take it as one
            self._step = _Step()
        return self._step

    def _add_text(self, text: str) -> StreamEvent:
        self._texts.append(text)
        self.offset += utf16_length(text)
        return text_event(text)

    def _cite(self, citations: Iterable[dict[str, Any]], start: int, end: int, span: str = "") -> list[StreamEvent]:
        events = []
        for raw in citations:
            citation, self.replaced = _count(storable_json(raw), self.replaced)
            source = citation_source(citation)
            if source is None:
                kind = skipped_type_name(citation.get("type"))
                self.skipped[kind] = self.skipped.get(kind, 0) + 1
                continue
            entry: dict[str, Any] = {
                "source": source,
                "title": citation.get("title") if isinstance(citation.get("title"), str) else None,
                "cited_text": citation["cited_text"],
                "start": start,
                "end": end,
            }
            target = self.registry.target_for(source)
            if target is not None:
                entry["target"] = target.to_json()
            support = self.support_of(citation, source, span, start)
            if support is not None:
                entry["support"] = support
            self._record(entry)
            events.append(citation_event(entry))
        return events

    def support_of(self, citation: Mapping[str, Any], source: str, span: str, start: int) -> dict[str, Any] | None:
        """The `support` of a recorded citation of `source` on `span` (which starts at `start`, UTF-16 units).

        `unchecked` for a `web_search_result_location` (its page text never
        reaches this service) and for a source no tool call of the turn
        returned; else `citations.support.citation_support` against the
        blocks `sources` holds now. None when it cannot be computed.
        """
        if citation.get("type") == WEB_SEARCH_RESULT_LOCATION:
            return dict(UNCHECKED_SUPPORT, unmatched=[])
        blocks = self.sources.blocks(source)
        return citation_support(span=span, span_start=start, cited_text=citation["cited_text"], blocks=blocks)

    def _record(self, entry: dict[str, Any]) -> None:
        self.inline.append(entry)
        self._summary.setdefault(
            (entry["source"], entry["cited_text"]),
            {key: value for key, value in entry.items() if key not in ("start", "end", "support")},
        )


def _count(cleaned: tuple[Any, int], total: int) -> tuple[Any, int]:
    value, replaced = cleaned
    return value, total + replaced


def _is_inline_entry(entry: object) -> bool:
    return (
        isinstance(entry, Mapping)
        and isinstance(entry.get("source"), str)
        and isinstance(entry.get("cited_text"), str)
        and isinstance(entry.get("start"), int)
        and isinstance(entry.get("end"), int)
    )


def replay(events: Iterable[Event], assembler: TurnAssembler | None = None) -> TurnAssembler:
    """Feed a validated record's events whole to `assembler` (a new one when None) and return it."""
    assembler = assembler if assembler is not None else TurnAssembler()
    for event in events:
        if isinstance(event, ToolCallEvent):
            assembler.tool_call(event.name, event.input, event.output)
        elif isinstance(event, AssistantEvent):
            assembler.assistant_message(event.message)
    return assembler


def assemble_record(events: Iterable[Event]) -> AssembledTurn:
    """Feed a validated record's events whole and return what the turn stores (docs/turns.md).

    Citations of types that are not recorded are logged by type and count, never their content.
    """
    assembler = replay(events)
    for kind, count in assembler.skipped.items():
        logger.info("skipped %d citation(s) of type %s (not recorded, docs/turns.md#citation-types)", count, kind)
    return assembler.result()
