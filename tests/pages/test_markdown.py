"""The answer renderer's bounds and its linear placement (pages.markdown, docs/pages.md#bounds). No database.

The attacker's inputs of issue 36 (a 240,000-character table row, 10,000 citations over inline Markdown,
131,000 `*a`) are each rendered within the bounds: asserted on what comes out and on the bound, never on
time (bench/render.py times them).
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from citations.utf16 import utf16_length
from pages.markdown import (
    ANSWER_MARKDOWN_MAX_CHARS,
    ANSWER_MAX_CITATIONS,
    MARKDOWN,
    _Anchors,
    _runs,
    render_answer,
)
from pages.source_map import annotate
from pages.templatetags.chips import answer as answer_tag

CHIP = re.compile(r'<silvia-chip data-slot="(\d+)"></silvia-chip>')


def cite(start: int, end: int, n: int = 0) -> dict[str, object]:
    return {"source": f"https://e.example/{n}", "title": f"T{n}", "cited_text": "c", "start": start, "end": end}


def test_the_bound_is_where_markdown_stops_and_plain_text_starts():
    text = "**bold** and a [link](https://e.example/a)\n\n"
    fits = text + "x" * (ANSWER_MARKDOWN_MAX_CHARS - len(text))
    assert len(fits) == ANSWER_MARKDOWN_MAX_CHARS
    assert render_answer(fits, [], account_names={}).html.startswith("<p><strong>bold</strong> and a <a href=")
    over = fits + "x"
    html = render_answer(over, [], account_names={}).html
    assert html == f"<p>**bold** and a [link](https://e.example/a)</p>\n<p>{'x' * (len(over) - len(text))}</p>\n"


def test_a_240000_character_table_row_shows_as_plain_text_with_its_chip():
    row = "|" + " a |" * 60_000
    answer = f"{row}\n|{'---|' * 60_000}\n| x |"
    assert len(row) == 240_001
    start = answer.index("| x |") + 2
    rendered = render_answer(answer, [cite(start, start + 1)], account_names={})
    assert "<table" not in rendered.html and "<td" not in rendered.html
    # The text as written, line breaks kept, the cited `x` highlighted with its chip after it.
    assert rendered.html == (
        f'<p>{row}<br>\n|{"---|" * 60_000}<br>\n| <mark class="cited">x</mark>'
        '<silvia-chip data-slot="0"></silvia-chip> |</p>\n'
    )
    assert len(rendered.html) < len(answer) + 200  # 8.8 MB of cells before the bound


def test_the_widest_table_the_bound_allows_is_bounded_by_markdown_its_cell_cap():
    # 2,048 columns and as many empty rows as fit: markdown-it adds the missing cells of each row, at most
    # 65,536 in all (its MAX_AUTOCOMPLETED_CELLS), so the output stays a bounded multiple of the input.
    columns = 2048
    head = "|a" * columns + "\n" + "|-" * columns + "\n"
    answer = head + "|\n" * ((ANSWER_MARKDOWN_MAX_CHARS - len(head)) // 2)
    assert len(answer) <= ANSWER_MARKDOWN_MAX_CHARS
    html = render_answer(answer, [], account_names={}).html
    assert html.startswith('<div class="table-wrap"') and html.count("<td") == 65_536
    assert len(html) < len("<td></td>\n") * 65_536 + 4 * len(answer)  # 0.7 MB at most


def test_131000_star_a_shows_as_plain_text():
    answer = "*a" * 131_000
    assert render_answer(answer, [], account_names={}, partial=True).html == f"<p>{answer}</p>\n"
    assert render_answer(answer, [], account_names={}).html == f"<p>{answer}</p>\n"


def test_10000_citations_over_inline_markdown_show_the_first_thousand_and_count_the_rest():
    unit = "**bold** _em_ `code` [link](https://e.example) "
    answer = (unit * (ANSWER_MARKDOWN_MAX_CHARS // len(unit)))[:ANSWER_MARKDOWN_MAX_CHARS]
    units = utf16_length(answer)
    inline = [cite((7 * n) % (units - 4), (7 * n) % (units - 4) + 4, n) for n in range(10_000)]
    inline[3] = {"source": "s", "start": "not a number"}  # a stray chip counts among the first thousand
    for partial in (False, True):
        rendered = render_answer(answer, inline, account_names={}, partial=partial)
        placed = [chip for slot in rendered.slots for chip in slot]
        assert rendered.more == 10_000 - ANSWER_MAX_CITATIONS
        assert len(rendered.stray) == 1
        assert len(placed) + len(rendered.stray) == ANSWER_MAX_CITATIONS if not partial else len(placed) <= 999
        assert {chip.title for chip in placed} <= {f"T{n}" for n in range(ANSWER_MAX_CITATIONS)}
    html = str(answer_tag(render_answer(answer, inline, account_names={}), "c"))
    assert html.count('class="chip chip--') == ANSWER_MAX_CITATIONS
    assert html.endswith('<p class="stray">9,000 more citations are not shown (an answer shows its first 1,000).</p>')


def test_a_streaming_answer_past_the_bound_shows_whole_as_plain_text():
    answer = "x " * (ANSWER_MARKDOWN_MAX_CHARS // 2) + "**open"
    rendered = render_answer(answer, [cite(len(answer) - 4, len(answer))], account_names={}, partial=True)
    # Nothing is held back: plain text has no unfinished markup, and the citation at the very end shows.
    assert rendered.html.endswith('**<mark class="cited">open</mark><silvia-chip data-slot="0"></silvia-chip></p>\n')


def test_a_shortcut_link_followed_by_an_unclosed_bracket_renders_every_character():
    # It raised IndexError (a stored answer's page was a 500), and a `[` after such a link was lost.
    answer = "[ref]:http://g\n[ref][\n["
    html = render_answer(answer, [cite(15, 21)], account_names={}).html  # `[ref][`
    assert html == (
        '<p><a href="http://g" target="_blank" rel="noopener noreferrer nofollow"><mark class="cited">ref'
        '</mark></a><mark class="cited">[</mark><silvia-chip data-slot="0"></silvia-chip>\n[</p>\n'
    )


def _anchor_by_scan(runs, end: int, hide_from: int):
    """The rule as a scan from the end, run by run (what `_Anchors` replaces: one scan per citation)."""
    limit = min(end, hide_from)
    for run in reversed(runs):
        pos = run.token.meta["pos"]
        if pos[0] >= limit:
            continue
        for index in range(len(pos) - 1, -1, -1):
            if pos[index] < limit and run.token.content[index] != "\n":
                return run, index
    return None


MARKDOWNISH = st.lists(
    st.sampled_from([*"ab c*_`[]()#>-|!\\&;:/.\n1\t", "https://", "amp", "💳", "\n\n", "~~", "  \n", "| a |\n|---|\n"]),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(MARKDOWNISH, st.integers(0, 3))
def test_each_anchor_is_what_a_scan_from_the_end_finds(text, cut):
    tokens = MARKDOWN.parse(text)
    annotate(tokens, text)
    runs = _runs(tokens)
    hide_from = len(text) - cut
    anchors = _Anchors(runs, hide_from)
    for end in range(-1, len(text) + 3):
        found, expected = anchors.find(end), _anchor_by_scan(runs, end, hide_from)
        assert (found and (id(found[0].token), found[1])) == (expected and (id(expected[0].token), expected[1]))
