"""Answers as Markdown with citations in place (pages.markdown, pages.source_map, docs/pages.md). No database."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citations.utf16 import utf16_length
from pages.markdown import MARKDOWN, render_answer
from pages.presenters import Chip
from pages.source_map import annotate
from tests.markdown_answers import CARDS_SOURCE, DEADLINES_SOURCE, IRS_URL, overview_answer

VOID = {"br", "hr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str | None] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)
    parent: Node | None = None

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self):
        for child in self.children:
            if isinstance(child, Node):
                yield child
                yield from child.walk()

    def path(self) -> list[str]:
        node, tags = self.parent, []
        while node is not None and node.tag != "#root":
            tags.append(node.tag)
            node = node.parent
        return tags[::-1]

    def previous(self) -> Node | str | None:
        assert self.parent is not None
        index = next(i for i, c in enumerate(self.parent.children) if c is self)
        return self.parent.children[index - 1] if index else None


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.node = Node("#root")

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), parent=self.node)
        self.node.children.append(node)
        if tag not in VOID:
            self.node = node

    def handle_endtag(self, tag):
        assert self.node.tag == tag, f"</{tag}> closes <{self.node.tag}>"
        assert self.node.parent is not None
        self.node = self.node.parent

    def handle_data(self, data):
        self.node.children.append(data)


def tree(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    assert builder.node is builder.root, "unclosed element"
    return builder.root


def span(answer: str, piece: str, title: str = "T", *, occurrence: int = 0) -> dict[str, object]:
    """An untyped inline citation on the `occurrence`-th `piece` of `answer` (UTF-16 offsets)."""
    index = -1
    for _ in range(occurrence + 1):
        index = answer.index(piece, index + 1)
    start = utf16_length(answer[:index])
    return {"source": "s", "title": title, "cited_text": piece, "start": start, "end": start + utf16_length(piece)}


def slots_by_title(answer: str, inline: list[dict[str, object]], **kwargs) -> dict[str, Node]:
    """Render; each chip's slot element by its chip's title (every title placed once)."""
    rendered = render_answer(answer, inline, account_names={}, **kwargs)
    root = tree(rendered.html)
    found = {}
    for node in root.walk():
        if node.tag == "silvia-chip":
            for chip in rendered.slots[int(node.attrs["data-slot"] or "")]:
                found[chip.title] = node
    return found


def html_of(answer: str, inline: list[dict[str, object]] | None = None, **kwargs) -> str:
    return render_answer(answer, inline or [], account_names={}, **kwargs).html


ACCOUNTS: dict[str, object] = {"kind": "accounts", "accounts": [{"accountId": "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK"}]}
OVERVIEW_TARGETS: dict[str, dict[str, object]] = {
    CARDS_SOURCE: ACCOUNTS,
    IRS_URL: {"kind": "tax_reference", "url": IRS_URL},
    DEADLINES_SOURCE: {"kind": "tax_reference", "url": None},
}


def test_the_overview_answer_has_each_chip_where_it_is_cited():
    answer, inline = overview_answer(OVERVIEW_TARGETS)
    rendered = render_answer(answer, inline, account_names={})
    root = tree(rendered.html)
    slots = [n for n in root.walk() if n.tag == "silvia-chip"]
    placed = [(rendered.slots[int(s.attrs["data-slot"] or "")], s) for s in slots]
    # Document order: bold in a nested list item, a list item, two table cells, a link.
    assert [(chips[0].label, s.path()) for chips, s in placed] == [
        ("1 accounts", ["ul", "li", "ul", "li", "strong"]),
        ("401(k) limit increases to $24,500 for 2026, IRA limit increases to $7,500", ["ul", "li"]),
        ("1 accounts", ["div", "table", "tbody", "tr", "td"]),
        ("IRA deadlines", ["div", "table", "tbody", "tr", "td"]),
        ("401(k) limit increases to $24,500 for 2026, IRA limit increases to $7,500", ["p"]),
    ]
    highlighted = []
    for _, slot in placed:
        before = slot.previous()
        assert isinstance(before, Node)
        if before.tag == "a":  # a link cannot hold a chip: the chip follows the link
            assert before.attrs["href"] == IRS_URL
            [before] = before.children
        assert isinstance(before, Node) and before.tag == "mark"
        highlighted.append(before.text())
    assert highlighted == [answer[c["start"] : c["end"]] for c in inline]
    assert highlighted == [
        "Both credit cards carry a balance",
        "the IRA limit is $7,500 for 2026",
        "two cards under one label",
        "contribute by April 15, 2027",
        "the IRS announcement",
    ]
    assert [n.text() for n in root.walk() if n.tag == "mark"] == highlighted
    # The rest of the Markdown: a heading two levels down, inline code, a fenced block.
    assert [n.text() for n in root.walk() if n.tag == "h4"] == ["Cards"]
    assert [n.text() for n in root.walk() if n.tag == "code"] == [
        "purchase_apr",
        "SELECT account_name, current_balance\nFROM account_details;\n",
    ]


def test_raw_html_is_text_and_only_http_links_are_links():
    answer = (
        "<b>x</b> <img src=x onerror=alert(1)> <script>alert(1)</script> [a](javascript:alert(1)) "
        "[b](/relative) [c](mailto:a@b.example) <javascript:alert(1)> <https://e.example/a> "
        '![pic](https://e.example/p.png) [d](HTTPS://E.example "t")'
    )
    blank = 'target="_blank" rel="noopener noreferrer nofollow"'
    assert html_of(answer) == (
        "<p>&lt;b&gt;x&lt;/b&gt; &lt;img src=x onerror=alert(1)&gt; &lt;script&gt;alert(1)&lt;/script&gt; "
        "[a](javascript:alert(1)) [b](/relative) [c](mailto:a@b.example) &lt;javascript:alert(1)&gt; "
        f'<a href="https://e.example/a" {blank}>https://e.example/a</a> '
        f'<a href="https://e.example/p.png" {blank}>pic</a> '
        f'<a href="HTTPS://E.example" title="t" {blank}>d</a></p>\n'
    )


def test_headings_go_two_levels_down_and_tables_scroll_in_a_labelled_box():
    assert html_of("# One\n\n#### Four") == "<h3>One</h3>\n<h6>Four</h6>\n"
    assert html_of("| a | b |\n|---|--:|\n| 1 | 2 |") == (
        '<div class="table-wrap" role="region" tabindex="0" aria-label="Table: a, b"><table>\n'
        '<thead>\n<tr>\n<th>a</th>\n<th style="text-align:right">b</th>\n</tr>\n</thead>\n'
        '<tbody>\n<tr>\n<td>1</td>\n<td style="text-align:right">2</td>\n</tr>\n</tbody>\n</table></div>\n'
    )


def test_offsets_are_utf16_and_line_breaks_are_normalised():
    answer = "💳 You owe **$10**.\r\nNext line"
    slot = slots_by_title(answer, [span(answer, "$10")])["T"]
    assert slot.path() == ["p", "strong"]
    assert slot.previous() == Node("mark", {"class": "cited"}, ["$10"], slot.parent)


def test_escapes_and_entities_inside_a_span_are_highlighted_as_shown():
    answer = r"Costs \*two\* &amp; more"
    assert html_of(answer, [span(answer, r"\*two\* &amp;")]) == (
        '<p>Costs <mark class="cited">*two* &amp;</mark><silvia-chip data-slot="0"></silvia-chip> more</p>\n'
    )


def test_a_span_across_blocks_gets_its_chip_in_its_last_block():
    answer = "First para.\n\n- one\n- two\n\nAfter."
    assert html_of(answer, [span(answer, "para.\n\n- one\n- two\n")]) == (
        '<p>First <mark class="cited">para.</mark></p>\n<ul>\n<li><mark class="cited">one</mark></li>\n'
        '<li><mark class="cited">two</mark><silvia-chip data-slot="0"></silvia-chip></li>\n</ul>\n<p>After.</p>\n'
    )


def test_a_span_that_shows_nothing_follows_the_last_character_before_its_end():
    answer = "A **bold** word"
    inline = [
        span(answer, "**", "closing markup", occurrence=1),
        {"source": "s", "title": "empty", "cited_text": "", "start": 2, "end": 2},
        {"source": "s", "title": "at zero", "cited_text": "", "start": 0, "end": 0},
    ]
    assert html_of(answer, inline) == (
        '<p><silvia-chip data-slot="2"></silvia-chip></p>\n'
        '<p>A <silvia-chip data-slot="1"></silvia-chip><strong>bold<silvia-chip data-slot="0"></silvia-chip>'
        "</strong> word</p>\n"
    )


def test_overlapping_spans_highlight_their_union_and_chip_each_end():
    answer = "abcdef"
    assert html_of(answer, [span(answer, "abcd", "A"), span(answer, "cdef", "B")]) == (
        '<p><mark class="cited">abcd</mark><silvia-chip data-slot="0"></silvia-chip>'
        '<mark class="cited">ef</mark><silvia-chip data-slot="1"></silvia-chip></p>\n'
    )


def test_chips_follow_code_and_links_which_cannot_hold_them():
    answer = "Run `SELECT 1` now, see [the **IRS** page](https://irs.example) today\n\n```\nx = 1\ny = 2\n```"
    inline = [span(answer, "SELECT", "code"), span(answer, "IRS", "link"), span(answer, "x = 1", "fence")]
    slots = slots_by_title(answer, inline)
    after = {title: slot.previous() for title, slot in slots.items()}
    assert {title: slot.path() for title, slot in slots.items()} == {"code": ["p"], "link": ["p"], "fence": ["pre"]}
    assert {title: node.tag for title, node in after.items() if isinstance(node, Node)} == {
        "code": "code",
        "link": "a",
        "fence": "code",
    }
    assert [n.text() for n in tree(html_of(answer, inline)).walk() if n.tag == "mark"] == ["SELECT", "IRS", "x = 1"]


def test_a_table_cell_with_an_escaped_pipe_and_a_blockquote():
    answer = "| a | b |\n|---|---|\n| x \\| y | z |\n\n> quoted **text**"
    slots = slots_by_title(answer, [span(answer, "x \\| y", "cell"), span(answer, "text", "quote")])
    assert {title: slot.path() for title, slot in slots.items()} == {
        "cell": ["div", "table", "tbody", "tr", "td"],
        "quote": ["blockquote", "p", "strong"],
    }
    assert {title: slot.previous() for title, slot in slots.items()} == {
        "cell": Node("mark", {"class": "cited"}, ["x | y"], slots["cell"].parent),
        "quote": Node("mark", {"class": "cited"}, ["text"], slots["quote"].parent),
    }


def test_unusable_spans_are_stray_chips_in_stored_order():
    answer = "💳 abc"
    inline = [
        {"source": "s", "title": "inside the pair", "start": 1, "end": 2},
        {"source": "s", "title": "reversed", "start": 4, "end": 3},
        {"source": "s", "title": "past the end", "start": 0, "end": 99},
        {"source": "s", "title": "bool", "start": True, "end": 2},
        {"source": "s", "title": "no span"},
        "not an object",
        span(answer, "abc", "fine"),
    ]
    rendered = render_answer(answer, inline, account_names={})
    labels = ["inside the pair", "reversed", "past the end", "bool", "no span", "Source"]
    assert [c.label for c in rendered.stray] == labels
    assert [c.title for s in rendered.slots for c in s] == ["fine"]


def test_an_empty_answer_keeps_its_chips():
    rendered = render_answer("", [{"source": "s", "title": "Z", "start": 0, "end": 0}], account_names={})
    assert rendered.html == '<p><silvia-chip data-slot="0"></silvia-chip></p>\n'
    assert rendered.slots == ((Chip("fallback", "Z", title="Z"),),)


# --- where each shown character comes from (source_map) ----------------------------------------

MARKDOWNISH = st.lists(
    st.sampled_from([*"ab c*_`[]()#>-|!\\&;:/.\n1\t", "https://", "amp", "💳", "\n\n", "~~", "  \n"]), max_size=40
).map("".join)


@settings(max_examples=400, deadline=None)
@given(MARKDOWNISH)
def test_every_character_shown_comes_from_the_same_character_of_the_answer(text):
    tokens = MARKDOWN.parse(text)
    annotate(tokens, text)
    shown = []
    for token in tokens:
        for child in [token, *(token.children or [])]:
            for inner in [child, *(child.children or [])] if child.type == "image" else [child]:
                pos = inner.meta.get("pos")
                if pos is None or inner.type in ("text_special", "softbreak"):
                    continue
                autolink = inner.type == "text" and any(
                    t.markup == "autolink" for t in (token.children or []) if t.type == "link_open"
                )
                for char, where in zip(inner.content, pos, strict=True):
                    if autolink or (where == len(text) and char == "\n"):  # code's closing newline
                        continue
                    # Code shows a line break as a space; markdown-it expands a tab into spaces.
                    assert text[where] == char or (char == " " and text[where] in "\n\t"), (inner, char, where)
                shown.extend(pos)
    assert shown == sorted(shown)  # in the order of the answer


@settings(max_examples=300, deadline=None)
@given(MARKDOWNISH, st.lists(st.tuples(st.integers(-2, 90), st.integers(-2, 90)), max_size=4), st.booleans())
def test_rendering_never_raises(text, spans, partial):
    inline = [{"source": "s", "title": "t", "start": a, "end": b} for a, b in spans]
    rendered = render_answer(text, inline, account_names={}, partial=partial)
    tree(rendered.html)  # well formed
    assert sum(len(s) for s in rendered.slots) + len(rendered.stray) <= len(inline)


@pytest.mark.parametrize(
    ("answer", "piece"),
    [("a\r\nb c", "b"), ("x\ry z", "y"), ("a\0b c", "b")],
    ids=["crlf", "cr", "nul"],
)
def test_line_ends_and_nul_keep_offsets(answer, piece):
    slot = slots_by_title(answer, [span(answer, piece)])["T"]
    assert slot.previous() == Node("mark", {"class": "cited"}, [piece], slot.parent)
