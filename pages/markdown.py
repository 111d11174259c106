"""Answers as Markdown with their citations in place (docs/pages.md#citations-in-markdown).

`render_answer` is the one place an answer becomes HTML, for a page, for the
fragment a live turn swaps in when it is saved and for each step of a turn
while it streams (`partial=True`, with `pages.streaming.stable_markdown`), so
a streamed answer ends equal to a reloaded one by construction.

The dialect is `pages.markdown_parser`'s; images show as links (a page
makes no third-party request), answer headings go two levels down (under
the page's h1 and the turn's h2), tables scroll in their own box. The result goes through nh3 (ammonia) with an
allowlist; citation chips are put in afterwards, where the sanitized HTML
has a `<silvia-chip data-slot="n">` marker (text cannot make one: every `<`
of the answer is escaped).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import nh3
from markdown_it.token import Token

from pages.markdown_parser import markdown_parser
from pages.presenters import Chip, cited_spans
from pages.source_map import annotate
from pages.streaming import stable_markdown

__all__ = ["ANSWER_MARKDOWN_MAX_CHARS", "ANSWER_MAX_CITATIONS", "SLOT", "AnswerHtml", "render_answer"]

ANSWER_MARKDOWN_MAX_CHARS = 16_384
"""The longest answer shown as Markdown (characters); a longer one shows as plain text (docs/pages.md#bounds).

markdown-it-py costs up to about 25 µs of CPU a character on markup a hostile model or client
writes (tables, list items, links), so this bounds a render to a few tenths of a second; a
model step's answer at the default `ANTHROPIC_MAX_TOKENS` (4,096 tokens) is about this long."""

ANSWER_MAX_CITATIONS = 1_000
"""The most inline citations an answer shows as chips, in stored order; the rest are counted."""

SLOT = re.compile(r'<silvia-chip data-slot="(\d+)"></silvia-chip>')
"""A chip slot in `AnswerHtml.html`; group 1 is the index into `AnswerHtml.slots`."""


@dataclass(frozen=True, slots=True)
class AnswerHtml:
    """A rendered answer: sanitized `html` whose `SLOT` markers take the chips of `slots[n]`.

    `stray` holds the chips of citations whose span cannot be used (shown
    after the answer, "Also cited:"); `more` counts the citations past
    `ANSWER_MAX_CITATIONS`.
    """

    html: str
    slots: tuple[tuple[Chip, ...], ...]
    stray: tuple[Chip, ...]
    more: int = 0
    """Inline citations past `ANSWER_MAX_CITATIONS`: counted, not shown."""


MARKDOWN = markdown_parser()
MARKDOWN.disable("text_join")  # keeps escapes and entities apart from text, so source_map can place them

_ALLOWED_TAGS = {
    *("p", "br", "hr", "strong", "em", "s", "code", "pre", "blockquote", "ul", "ol", "li"),
    *("h3", "h4", "h5", "h6", "div", "table", "thead", "tbody", "tr", "th", "td", "a", "mark", "silvia-chip"),
}
_ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "th": {"style"},
    "td": {"style"},
    "mark": {"class"},
    "div": {"class", "role", "tabindex", "aria-label"},
    "silvia-chip": {"data-slot"},
}


def _sanitize(html: str) -> str:
    return nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        attributes=_ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https"},
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        filter_style_properties={"text-align"},
        strip_comments=True,
    )


# --- rendering: the rules that differ from markdown-it's own -------------------------------


def _slot_markers(slots: Sequence[int]) -> str:
    return "".join(f'<silvia-chip data-slot="{n}"></silvia-chip>' for n in slots)


def _emit(text: str, meta: Mapping[str, Any], env: Mapping[str, Any]) -> str:
    """`text` escaped, its cited characters in `<mark>`, chip slots after the characters they follow."""
    pos: list[int] = meta.get("pos", [])
    if len(pos) != len(text):
        return escape(text, quote=False)
    covered, hide_from = env["covered"], env["hide_from"]
    slots_in: Mapping[int, list[int]] = meta.get("slots_in", {})
    out: list[str] = []
    run: list[str] = []
    marked = False

    def flush() -> None:
        if run:
            piece = escape("".join(run), quote=False)
            out.append(f'<mark class="cited">{piece}</mark>' if marked else piece)
            run.clear()

    for index, char in enumerate(text):
        if pos[index] >= hide_from:
            continue
        if covered[pos[index]] != marked:
            flush()
            marked = not marked
        run.append(char)
        if index in slots_in:
            flush()
            out.append(_slot_markers(slots_in[index]))
    flush()
    return "".join(out)


def _after(token: Token) -> str:
    return _slot_markers(token.meta.get("slots_after", ()))


def _text(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return _emit(tokens[idx].content, tokens[idx].meta, env)


def _softbreak(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return _emit("\n", tokens[idx].meta, env)


def _code_inline(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    return f"<code>{_emit(token.content, token.meta, env)}</code>{_after(token)}"


def _code_block(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    return f"<pre><code>{_emit(token.content, token.meta, env)}</code>{_after(token)}</pre>\n"


def _link_attrs(href: object, title: object) -> str:
    title_attr = f' title="{escape(title)}"' if isinstance(title, str) and title else ""
    return f'<a href="{escape(str(href))}"{title_attr}>'


def _link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    return _link_attrs(token.attrGet("href"), token.attrGet("title"))


def _link_close(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return f"</a>{_after(tokens[idx])}"


def _image(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    # A link to the image, never the image: a page loads nothing from elsewhere.
    token = tokens[idx]
    alt = self.renderInline(token.children or [], options, env)
    return f"{_link_attrs(token.attrGet('src'), token.attrGet('title'))}{alt}</a>{_after(token)}"


def _heading(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    level = min(6, int(token.tag[1]) + 2)
    return f"<h{level}>" if token.nesting == 1 else f"</h{level}>\n"


def _table_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    # A wide table scrolls inside its own box (never the page); the box is focusable so a keyboard can scroll it.
    headers = []
    for token in tokens[idx + 1 :]:
        if token.type == "thead_close":
            break
        if token.type == "inline":
            headers.append(token.content)
    label = "Table: " + ", ".join(h for h in headers if h) if any(headers) else "Table"
    return f'<div class="table-wrap" role="region" tabindex="0" aria-label="{escape(label)}"><table>\n'


def _table_close(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return "</table></div>\n"


for _name, _rule in {
    "text": _text,
    "text_special": _text,
    "softbreak": _softbreak,
    "code_inline": _code_inline,
    "code_block": _code_block,
    "fence": _code_block,
    "link_open": _link_open,
    "link_close": _link_close,
    "image": _image,
    "heading_open": _heading,
    "heading_close": _heading,
    "table_open": _table_open,
    "table_close": _table_close,
}.items():
    MARKDOWN.add_render_rule(_name, _rule)


# --- placing the citations ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Run:
    """A token that shows text (`meta["pos"]`), and the link or code a chip after it must follow instead."""

    token: Token
    host: Token | None


def _runs(tokens: Sequence[Token]) -> list[_Run]:
    """The tokens that show text, in the order shown."""
    out: list[_Run] = []

    def inline(children: Sequence[Token], host: Token | None) -> None:
        # closes[i]: the first link_close at or after children[i] (one pass: a search per link was quadratic)
        closes: list[Token | None] = [None] * len(children)
        after: Token | None = None
        for position in range(len(children) - 1, -1, -1):
            if children[position].type == "link_close":
                after = children[position]
            closes[position] = after
        link: Token | None = None
        for position, token in enumerate(children):
            if token.type == "link_open" and host is None:
                link = closes[position]
            elif token.type == "link_close":
                link = None
            elif token.type == "image":
                inline(token.children or [], host or link or token)
            elif token.type == "code_inline":
                out.append(_Run(token, host or link or token))
            elif token.type in ("text", "text_special"):
                out.append(_Run(token, host or link))

    for token in tokens:
        if token.type == "inline":
            inline(token.children or [], None)
        elif token.type in ("fence", "code_block"):
            out.append(_Run(token, token))
    return [run for run in out if run.token.meta.get("pos")]


class _Anchors:
    """`find(end)`: the last character shown (not a line break) that comes from before index `end`.

    That is the last character, in the order shown, whose position and whose run's first position
    are both below `end` and `hide_from` (a run whose positions only grow starts after `end` when its
    first one does, so it is skipped whole). Indexed once by that key, each citation's anchor is one
    lookup: with a scan per citation, 10,000 citations over a long answer took minutes.
    """

    def __init__(self, runs: Sequence[_Run], hide_from: int) -> None:
        self._runs = runs
        self._hide_from = hide_from
        size = max((max(run.token.meta["pos"]) for run in runs), default=-1) + 2
        # last[k]: (run number, index) of the last character shown whose key is below k, else None.
        last: list[tuple[int, int] | None] = [None] * (size + 1)
        for number, run in enumerate(runs):
            pos: list[int] = run.token.meta["pos"]
            first, text = pos[0], run.token.content
            for index, p in enumerate(pos):
                if text[index] != "\n":
                    last[max(p, first) + 1] = (number, index)  # written in the order shown: the last wins
        for k in range(1, size + 1):
            before = last[k - 1]
            if before is not None and (last[k] is None or before > last[k]):  # type: ignore[operator]
                last[k] = before
        self._last = last

    def find(self, end: int) -> tuple[_Run, int] | None:
        """The anchor of a span ending at `end`: its run and index, or None (nothing shown before it)."""
        found = self._last[max(0, min(end, self._hide_from, len(self._last) - 1))]
        if found is None:
            return None
        number, index = found
        return self._runs[number], index


class _Slots:
    """The chips placed so far: `chips[n]` go where the tokens' metadata marks slot n; `lead` before the answer."""

    def __init__(self) -> None:
        self.chips: list[list[Chip]] = []
        self.lead: list[Chip] = []
        self._where: dict[tuple[int, int], int] = {}

    def add(self, chip: Chip, anchor: tuple[_Run, int] | None) -> None:
        """Put `chip` after the anchor character (a link or code: after it), with any chip already there."""
        if anchor is None:
            self.lead.append(chip)
            return
        run, index = anchor
        key = (id(run.host), -1) if run.host is not None else (id(run.token), index)
        if key not in self._where:
            slot = self._where[key] = len(self.chips)
            self.chips.append([])
            if run.host is not None:
                run.host.meta.setdefault("slots_after", []).append(slot)
            else:
                run.token.meta.setdefault("slots_in", {}).setdefault(index, []).append(slot)
        self.chips[self._where[key]].append(chip)


def _covered(spans: Sequence[tuple[Chip, int, int]], size: int) -> bytearray:
    """For each index below `size`, 1 when some `[start, end)` of `spans` covers it."""
    change = [0] * (size + 1)
    for _, start, end in spans:
        change[start] += 1
        change[end] -= 1
    covered, depth = bytearray(size + 1), 0
    for index, delta in enumerate(change):
        depth += delta
        covered[index] = depth > 0
    return covered


def _to_parsed(answer: str) -> tuple[str, list[int] | None]:
    """The answer with markdown-it's own normalisation (CR LF and CR to LF, NUL to U+FFFD), and
    the index in it of each index of the answer (None when nothing changed)."""
    if "\r" not in answer and "\0" not in answer:
        return answer, None
    out: list[str] = []
    where: list[int] = []
    for index, char in enumerate(answer):
        where.append(len(out))
        if char == "\r" and answer[index + 1 : index + 2] == "\n":
            continue
        out.append("\n" if char == "\r" else "\ufffd" if char == "\0" else char)
    where.append(len(out))
    return "".join(out), where


def _plain_tokens(source: str) -> list[Token]:
    """`source` as plain text in markdown-it's tokens: its paragraphs (blank lines apart), each line
    break a `<br>`, every character shown from where it is (`meta["pos"]`), so citations are placed by
    the same rule as in Markdown."""
    tokens: list[Token] = []
    children: list[Token] = []

    def close() -> None:
        if children:
            inline = Token("inline", "", 0, children=list(children))
            opening = Token("paragraph_open", "p", 1, block=True)
            tokens.extend((opening, inline, Token("paragraph_close", "p", -1, block=True)))
            children.clear()

    start = 0
    for line in source.split("\n"):
        if not line.strip(" \t"):
            close()
        else:
            if children:
                children.append(Token("hardbreak", "br", 0))
            children.append(Token("text", "", 0, content=line, meta={"pos": list(range(start, start + len(line)))}))
        start += len(line) + 1
    close()
    return tokens


def render_answer(
    answer: str, inline: object, *, account_names: Mapping[str, str], partial: bool = False
) -> AnswerHtml:
    """The answer as sanitized HTML with its inline citations highlighted and chipped; never raises.

    `inline` is the stored `inline_citations` value (spans in UTF-16 code
    units of `answer`). The rule (docs/pages.md#citations-in-markdown): the
    characters shown from inside a span are highlighted; its chip follows
    the last of them that is not a line break, in the same element (a list
    item, a table cell, bold text), except that a link or code cannot hold a
    chip, so there the chip follows the link or code. A span crossing blocks
    thus ends with its chip in its last block. A span that shows nothing gets
    its chip after the last character shown before its end (before the
    answer when there is none). `partial=True` renders a streaming answer:
    only what cannot change layout later (`stable_markdown`), and only the
    citations that end inside it.

    Bounded (docs/pages.md#bounds): an answer longer than
    `ANSWER_MARKDOWN_MAX_CHARS` shows as plain text (whole, streaming or
    not), and only the first `ANSWER_MAX_CITATIONS` citations show, so a
    render costs time linear in the answer and its citations, and at most
    a few tenths of a second.
    """
    entries = inline if isinstance(inline, list) else []
    spans, stray = cited_spans(answer, entries[:ANSWER_MAX_CITATIONS], account_names=account_names)
    source, where = _to_parsed(answer)
    markdown, shown, hide_from = source, len(source), len(source)
    if len(answer) > ANSWER_MARKDOWN_MAX_CHARS:
        tokens = _plain_tokens(source)
    else:
        if partial:
            stable = stable_markdown(source)
            markdown, shown, hide_from = stable.markdown, stable.shown, stable.base
        tokens = MARKDOWN.parse(markdown)
        annotate(tokens, markdown)
    runs = _runs(tokens)

    placed = [(s.chip, where[s.start], where[s.end]) if where else (s.chip, s.start, s.end) for s in spans]
    placed = [p for p in placed if p[2] <= shown]  # streaming: a span whose text is not shown yet waits
    slots, anchors = _Slots(), _Anchors(runs, hide_from)
    for chip, _, end in placed:
        slots.add(chip, anchors.find(end))
    env = {"covered": _covered(placed, max(len(markdown), len(source)) + 1), "hide_from": hide_from}
    # One highlight where an escape, an entity or a line break split the text into tokens.
    html = MARKDOWN.renderer.render(tokens, MARKDOWN.options, env).replace('</mark><mark class="cited">', "")
    if slots.lead:
        html = f"<p>{_slot_markers([len(slots.chips)])}</p>\n{html}"
        slots.chips.append(slots.lead)
    more = max(0, len(entries) - ANSWER_MAX_CITATIONS)
    return AnswerHtml(_sanitize(html), tuple(tuple(c) for c in slots.chips), tuple(stray), more)
