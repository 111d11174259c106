"""How much of a streaming answer a page shows, so nothing shown changes its layout later (docs/pages.md#streaming).

A Markdown answer that is still arriving is ambiguous at its end: `**Cha`
is bold text or two asterisks, `| Account |` a table header or a line of
text, `-` a list item or a heading's underline. Shown as it stands, the
page would flash `**` and then bold, a line and then a table.
`stable_markdown` holds back the end that is still undecided and closes
what is open, so that what a page shows of a partial answer is, character
for character, where the whole answer will put it (a property test checks
this over every prefix of an answer). Pure: no Django.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

from pages.markdown_parser import markdown_parser

__all__ = ["Stable", "stable_markdown"]

# A line that is still only block markers: `-`, `1.`, `##`, `>`, `|`, a fence's backticks, a rule.
_MARKERS_ONLY = re.compile(r"[ \t>]*(?:[-+*=_#|~`:.)0-9][ \t]*)*")
# The start of a GFM table's delimiter row (`|---|:--:|`), possibly empty. One class, not `[ \t]*\|?[ \t:|-]*`
# (the same strings), whose overlapping runs backtracked quadratically on a line of spaces ending otherwise.
_DELIMITER_ROW_START = re.compile(r"[ \t:|-]*")
# A blank line, reversed (searched from the end): newline, blanks, newline.
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
# What ends a line unfinished: an escape, an image's `!`, an entity, a run of emphasis or code markers, an
# autolink. The pattern is the definition; `_open_end_start` finds its match without searching (below).
_OPEN_END = re.compile(r"(?:\\|!|&#?[A-Za-z0-9]*|[*_~`]+|<[A-Za-z][A-Za-z0-9+.-]*(?::[^\s<>]*)?|<)\Z")
_ENTITY = re.compile(r"&#?[A-Za-z0-9]*")
_AUTOLINK = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.-]*(?::[^\s<>]*)?)?")
# More unfinished ends than this at the end of one line and the whole line is held (see `_hold_open_end`).
_MAX_OPEN_ENDS = 200


class Stable(NamedTuple):
    """`markdown` to render for a partial answer `src`: `src[:base]` plus closing markers.

    `shown` counts the characters of `src` the render stands for (a
    citation ending after it waits); characters from `base` on are closers
    and show nothing.
    """

    markdown: str
    shown: int
    base: int


def _unclosed(state: StateInline) -> None:
    # After balance_pairs: the top-level emphasis and strikethrough openers left without a
    # closer, by the inline content parsed (they depend on nothing else).
    unclosed = [chr(d.marker) for d in state.delimiters if d.open and d.end < 0]
    state.env.setdefault("unclosed", {})[state.src] = unclosed


_PARSER = markdown_parser()
_PARSER.inline.ruler2.after("balance_pairs", "unclosed", _unclosed)
# The block structure alone (no inline parse): which blocks there are, and each inline token's content.
# An inline token's children depend only on its content and the references the blocks define, so the
# one token a question is about is then parsed alone (`_inline`), not every cell of a long table.
_BLOCKS = markdown_parser()
_BLOCKS.disable("inline")


def _inline(token: Token, env: dict[str, Any]) -> Token:
    """`token` (an inline token of a `_BLOCKS` parse whose `env` it filled) with its children."""
    return _PARSER.parseInline(token.content, env)[0]


def _last_block(text: str) -> str:
    """`text` from after its last blank line: all a table or a paragraph at its end can span.

    Parsing only this keeps a streaming step's cost from growing with the
    answer; a blank line inside a fenced block at the end only misleads the
    closers, which then close nothing that shows (they are hidden).
    """
    blank = _BLANK_LINE.search(text[::-1])
    return text[len(text) - blank.start() :] if blank else text


def _table_runs_to_end(text: str) -> bool:
    """Whether `text` (whole lines) ends inside a table, so a next line is one of its rows."""
    text = _last_block(text)
    if "|" not in text:
        return False
    lines = text.count("\n")
    return any(t.type == "table_open" and t.map and t.map[1] >= lines for t in _BLOCKS.parse(text))


def _hold_table_start(src: str, shown: int) -> int:
    """Hold a line that may be a table's header row until the next line shows whether it is."""
    head_end = src.rfind("\n", 0, shown) + 1
    tail = src[head_end:shown]
    if "|" in tail:
        return shown if _table_runs_to_end(src[:head_end]) else head_end
    if not head_end or not _DELIMITER_ROW_START.fullmatch(tail) or _table_runs_to_end(src[:head_end]):
        return shown
    prev_start = src.rfind("\n", 0, head_end - 1) + 1
    if "|" in src[prev_start:head_end] and not _table_runs_to_end(src[:prev_start]):
        return prev_start
    return shown


def _open_link_start(line: str) -> int:
    """Where an unfinished `[text](url` (or image) starts in `line`, else -1."""
    start = line.rfind("[")
    while start > 0 and line[start - 1] == "\\":
        start = line.rfind("[", 0, start - 1)
    if start < 0:
        return -1
    rest = line[start:]
    close = rest.find("]")
    unfinished = close < 0 or close == len(rest) - 1 or (rest[close + 1] == "(" and ")" not in rest[close + 1 :])
    if not unfinished:
        return -1
    return start - 1 if start and line[start - 1] == "!" else start


def _open_end_start(line: str) -> int:
    """Where `_OPEN_END` matches in `line`, else -1: the earliest start of a suffix it matches.

    `_OPEN_END.search` tries every start and, after a run of markers that
    is not at the end (`***…*a`), rescans the run from each: quadratic in the
    line, minutes for a line of 100,000 characters a client posts to the
    preview. A match is a suffix, and each alternative can start at one
    place only (a marker run's start, the last `&`, the last `<`, the last
    character), so those are checked.
    """
    starts = []
    if line.endswith(("\\", "!")):
        starts.append(len(line) - 1)
    run = len(line) - len(line.rstrip("*_~`"))
    if run:
        starts.append(len(line) - run)
    for opener, pattern in (("&", _ENTITY), ("<", _AUTOLINK)):
        at = line.rfind(opener)
        if at >= 0 and pattern.fullmatch(line, at):
            starts.append(at)
    return min(starts, default=-1)


def _hold_open_end(src: str, shown: int) -> int:
    """Hold back the unfinished ends of the last line shown (escapes, entities, marker runs, links, ...),
    one after the other; past `_MAX_OPEN_ENDS` of them (no answer has that many in a row), the whole line,
    so a line made of nothing else costs a bounded number of steps."""
    line_start = src.rfind("\n", 0, shown) + 1
    for _ in range(_MAX_OPEN_ENDS + 1):  # the last step finds nothing more to hold
        line = src[line_start:shown]
        held = shown
        start = _open_end_start(line)
        if start >= 0:
            held = line_start + start
        link = _open_link_start(src[line_start:held])
        if link >= 0:
            held = line_start + link
        if held == shown:
            return shown
        shown = held
    return line_start


def _closers(base: str) -> str:
    """Markers that close the code span and emphasis left open at the end of `base`'s last block."""
    base = _last_block(base)
    env: dict[str, Any] = {}
    tokens = _BLOCKS.parse(base, env)
    # The last block with content (a table row ends with the empty cells markdown-it adds).
    blocks = [t for t in tokens if t.type in ("fence", "code_block") or (t.type == "inline" and t.content.strip())]
    last = blocks[-1] if blocks else None
    if last is None or last.type != "inline" or not last.map or last.map[1] < base.count("\n") + 1:
        return ""
    which = [t for t in tokens if t.type == "inline"].index(last)
    closing = _inline(last, env)
    code = ""
    runs = re.findall(r"`+", last.content)
    trial_env: dict[str, Any] = {}
    # Backticks that would make the last line a fence (``` after ``) close nothing: that line has no inline.
    trials = [t for t in _BLOCKS.parse(base + runs[-1], trial_env) if t.type == "inline"] if runs else []
    if which < len(trials):
        trial = _inline(trials[which], trial_env)
        if sum(t.type == "code_inline" for t in trial.children or []) > sum(
            t.type == "code_inline" for t in closing.children or []
        ):
            code, closing, env = runs[-1], trial, trial_env
    markers = env.get("unclosed", {}).get(closing.content, [])
    return code + "".join("~~" if m == "~" else m for m in reversed(markers))


def stable_markdown(src: str) -> Stable:
    """What to render of `src`, an answer still streaming (see the module doc).

    Held back until the text after them decides: a last line of block
    markers only; a line that may be a table's header row (and the start
    of its delimiter row); at the end of the last line, an escape, an
    entity, a run of `*`, `_`, `~` or backticks, an unfinished link or
    autolink. Closed: a code span and emphasis opened in the last block,
    before the trailing white space (a closer after white space would not
    close).
    """
    shown = len(src)
    line_start = src.rfind("\n") + 1
    if line_start < shown and _MARKERS_ONLY.fullmatch(src[line_start:]):
        shown = line_start
    shown = _hold_table_start(src, shown)
    shown = _hold_open_end(src, shown)
    visible = src[:shown]
    if visible.endswith("\n\n") or not visible.strip():
        return Stable(visible, shown, shown)
    base = visible.rstrip()
    closers = _closers(base)
    if not closers:
        return Stable(visible, shown, shown)
    return Stable(base + closers, shown, len(base))
