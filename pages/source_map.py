"""Where each character a Markdown answer shows comes from (docs/pages.md#citations-in-markdown).

`annotate(tokens, src)` sets `token.meta["pos"]` on every markdown-it token
that renders text (`text`, `text_special`, `code_inline`, `softbreak`,
`fence`, `code_block`): one index into `src` per character the token shows,
so a citation's `[start, end)` span of the raw answer can be found in the
rendered answer. Pure: no Django.

markdown-it keeps line ranges (`token.map`) on block tokens but no offsets on
inline ones, so the offsets are recovered from what each token is made of:
an inline token's content is its source lines with the block markers
(`- `, `> `, `#`, indentation, table pipes) taken off, and its children are
that content in order, with their markup (`**`, `` ` ``, `[`, `](url)`,
escapes and entities) between them. A piece that cannot be found where it
should be (never seen in practice; a tab markdown-it expanded, say) falls
back to the nearest earlier position, so a lookup never fails.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from markdown_it.helpers import parseLinkDestination, parseLinkTitle
from markdown_it.token import Token

__all__ = ["annotate"]


def _align(text: str, raw: str, lo: int, hi: int) -> list[int]:
    """For each character of `text`, its index in `raw[lo:hi]`, matching in order (a subsequence).

    A space may be a tab that markdown-it expanded into spaces: the spaces it
    became all map to the tab.
    """
    out, cursor = [], lo
    # `raw.find(char, cursor, hi)` for a cursor that only grows: each character's next occurrence is kept
    # until the cursor passes it, and an absent one stays absent, so a line is read a bounded number of
    # times per distinct character, not once per character (a 240,000-character cell of words took minutes).
    ahead: dict[str, int] = {}

    def find(char: str) -> int:
        at = ahead.get(char)
        if at is None or 0 <= at < cursor:
            at = ahead[char] = raw.find(char, cursor, hi)
        return at

    for index, char in enumerate(text):
        found = find(char)
        if char == " ":
            tab = find("\t")
            if tab >= 0 and (found < 0 or tab < found):
                out.append(tab)
                more = text[index + 1 : index + 2] == " "
                cursor = tab if more else tab + 1
                continue
        if found < 0:
            out.append(max(lo, min(cursor, hi - 1)))
            continue
        out.append(found)
        cursor = found + 1
    return out


class _Lines:
    """`src` split into lines, with each line's start offset."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.text = src.split("\n")
        self.starts = [0]
        for line in self.text[:-1]:
            self.starts.append(self.starts[-1] + len(line) + 1)
        self._cells: dict[int, list[tuple[int, int]]] = {}

    def cells(self, number: int) -> list[tuple[int, int]]:
        """`_cell_segments` of line `number`, split once however many cells ask (a row of 60,000 cells)."""
        if number not in self._cells:
            self._cells[number] = _cell_segments(self.line(number)[0])
        return self._cells[number]

    def line(self, number: int) -> tuple[str, int]:
        if 0 <= number < len(self.text):
            return self.text[number], self.starts[number]
        return "", len(self.src)


def _content_map(content: str, lines: _Lines, first_line: int) -> list[int]:
    """`src` index of each character of `content`, whose lines are suffixes of `src` lines from `first_line`.

    One entry more than `content` has characters: where the content ends. A
    character markdown-it added (the last newline of code at the end of the
    answer) is at `len(src)`.
    """
    out: list[int] = []
    for number, part in enumerate(content.split("\n")):
        raw, start = lines.line(first_line + number)
        if number:  # the newline between two content lines (markdown-it adds one to code at the very end)
            out.append(start - 1 if lines.src[start - 1 : start] == "\n" else len(lines.src))
        offset = raw.rfind(part)
        if offset >= 0:
            out.extend(range(start + offset, start + offset + len(part)))
        else:
            out.extend(_align(part, lines.src, start, start + len(raw)))
    out.append(out[-1] + 1 if out else lines.line(first_line)[1])
    return out


def _cell_segments(row: str) -> list[tuple[int, int]]:
    """The `[start, end)` of each cell of a GFM table row, as markdown-it splits it (unescaped pipes)."""
    begin = len(row) - len(row.lstrip())
    end = len(row.rstrip())
    cuts, escaped = [], False
    for index in range(begin, end):
        if row[index] == "|" and not escaped:
            cuts.append(index)
        escaped = row[index] == "\\"
    edges = [begin - 1, *cuts, end]
    segments = [(a + 1, b) for a, b in itertools.pairwise(edges)]
    if segments and not row[segments[0][0] : segments[0][1]].strip() and cuts and cuts[0] == begin:
        segments.pop(0)
    if segments and not row[segments[-1][0] : segments[-1][1]].strip() and cuts and cuts[-1] == end - 1:
        segments.pop()
    return segments


def _cell_map(content: str, lines: _Lines, row: int, cell: int) -> list[int]:
    raw, start = lines.line(row)
    segments = lines.cells(row)
    lo, hi = segments[cell] if cell < len(segments) else (0, len(raw))
    out = _align(content, lines.src, start + lo, start + hi)
    out.append(out[-1] + 1 if out else start + lo)
    return out


def _skip_link_tail(content: str, at: int) -> int:
    """Past the `(destination "title")`, `[label]` or nothing that follows a link's `]` at `content[at - 1]`."""
    end = len(content)
    if at < end and content[at] == "(":
        pos = at + 1
        while pos < end and content[pos] in " \t\n":
            pos += 1
        dest = parseLinkDestination(content, pos, end)
        if dest.ok:
            pos = dest.pos
            while pos < end and content[pos] in " \t\n":
                pos += 1
            title = parseLinkTitle(content, pos, end)
            if title.ok:
                pos = title.pos
            while pos < end and content[pos] in " \t\n":
                pos += 1
        close = content.find(")", pos)
        return close + 1 if close >= 0 else end
    if at < end and content[at] == "[":  # `[label]`; a `[` with no `]` is text after a shortcut link
        close = content.find("]", at)
        return close + 1 if close >= 0 else at
    return at


def _code_inner(content: str, opening: int, marker: str) -> tuple[int, int]:
    """`[start, end)` of a code span's text in `content`, its backtick run `marker` starting at `opening`."""
    inner = opening + len(marker)
    close, at = len(content), inner
    while (at := content.find("`", at)) >= 0:
        run = at
        while run < len(content) and content[run] == "`":
            run += 1
        if run - at == len(marker):
            close = at
            break
        at = run
    text = content[inner:close]
    if text[:1] in (" ", "\n") and text[-1:] in (" ", "\n") and text.strip(" \n"):
        return inner + 1, close - 1
    return inner, close


def _walk(children: Sequence[Token], content: str, cmap: list[int], pos: int) -> int:
    """Set `meta["pos"]` on `children` (an inline token's, in order); returns where they end in `content`."""

    missing: set[str] = set()  # markup absent from the rest of `content`: `pos` only grows, so it stays absent

    def find(piece: str, start: int) -> int:
        if piece in missing:
            return start
        found = content.find(piece, start)
        if found < 0:
            missing.add(piece)
        return found if found >= 0 else start

    def at(index: int) -> int:  # where `content[index]` comes from; past its end, where it ends
        return cmap[min(index, len(cmap) - 1)]

    def place(token: Token, start: int, count: int) -> None:
        token.meta["pos"] = [at(start + k) for k in range(count)]

    autolink_end = -1  # inside `<…>`, the text is the URL as markdown-it normalised it
    for token in children:
        kind = token.type
        if kind == "text" and autolink_end >= 0:
            width = max(1, autolink_end - pos)
            token.meta["pos"] = [at(pos + min(k, width - 1)) for k in range(len(token.content))]
        elif kind == "text":
            if not token.content:
                continue
            start = content.find(token.content, pos)
            if start < 0:  # not verbatim (never expected): match it character by character
                lo = min(pos, len(content))
                token.meta["pos"] = [at(i) for i in _align(token.content, content, lo, len(content))]
                continue
            place(token, start, len(token.content))
            pos = start + len(token.content)
        elif kind == "text_special":  # an escape (`\*`) or an entity (`&amp;`), markup in `token.markup`
            start = find(token.markup, pos)
            shift = 1 if token.info == "escape" else 0
            token.meta["pos"] = [at(start + shift)] * len(token.content)
            pos = start + len(token.markup)
        elif kind in ("softbreak", "hardbreak"):
            start = find("\n", pos)
            token.meta["pos"] = [at(start)] if kind == "softbreak" else []
            pos = start + 1
        elif kind == "code_inline":
            start = find(token.markup, pos)
            inner, end = _code_inner(content, start, token.markup)
            place(token, inner, len(token.content))
            pos = end + len(token.markup)
        elif kind == "link_open" and token.markup == "autolink":
            pos = find("<", pos) + 1
            autolink_end = find(">", pos)
        elif kind == "link_close" and token.markup == "autolink":
            pos, autolink_end = autolink_end + 1, -1
        elif kind == "link_open":
            pos = find("[", pos) + 1
        elif kind == "link_close":
            pos = _skip_link_tail(content, find("]", pos) + 1)
        elif kind == "image":
            pos = _walk(token.children or [], content, cmap, find("![", pos) + 2)
            pos = _skip_link_tail(content, find("]", pos) + 1)
        elif token.markup and kind.endswith(("_open", "_close")):  # **, *, _, ~~
            pos = find(token.markup, pos) + len(token.markup)
    return pos


def annotate(tokens: Sequence[Token], src: str) -> None:
    """Set `meta["pos"]` (indices into `src`) on every token of `tokens` that shows text; see the module doc.

    `src` is the string markdown-it parsed (line breaks already `\\n`).
    """
    lines = _Lines(src)
    cell = 0
    for index, token in enumerate(tokens):
        if token.type == "tr_open":
            cell = -1
        elif token.type in ("th_open", "td_open"):
            cell += 1
        elif token.type == "inline" and token.map:
            if index and tokens[index - 1].type in ("th_open", "td_open"):
                cmap = _cell_map(token.content, lines, token.map[0], cell)
            else:
                cmap = _content_map(token.content, lines, token.map[0])
            _walk(token.children or [], token.content, cmap, 0)
        elif token.type in ("fence", "code_block") and token.map:
            first = token.map[0] + (1 if token.type == "fence" else 0)
            token.meta["pos"] = _content_map(token.content, lines, first)[: len(token.content)]
