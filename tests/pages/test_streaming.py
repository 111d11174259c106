"""pages.streaming: what a streaming step parses. The closers come from the block structure and the one
inline token they close, with the same result as parsing the last block whole (twice or three times, which
made a preview of a long table cost several renders); the delimiter-row pattern no longer backtracks.
No database.

A streaming answer shows nothing it will later move or restyle (pages.streaming, docs/pages.md#streaming).

No database."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pages.markdown import render_answer
from pages.streaming import (
    _DELIMITER_ROW_START,
    _MAX_OPEN_ENDS,
    _OPEN_END,
    _PARSER,
    Stable,
    _closers,
    _last_block,
    _open_end_start,
    stable_markdown,
)
from tests.markdown_answers import overview_answer
from tests.pages.test_markdown_citations import Node, span, tree


def _closers_by_full_parse(base: str) -> str:
    """`_closers` as it was: every question asked of a full parse of the last block (except that it raised
    IndexError, a preview's 500, when the backticks it tried made the last line a fence: ``` after ``)."""
    base = _last_block(base)
    tokens = _PARSER.parse(base)
    blocks = [t for t in tokens if t.type in ("fence", "code_block") or (t.type == "inline" and t.content.strip())]
    last = blocks[-1] if blocks else None
    if last is None or last.type != "inline" or not last.map or last.map[1] < base.count("\n") + 1:
        return ""
    which = [t for t in tokens if t.type == "inline"].index(last)
    code = ""
    runs = re.findall(r"`+", last.content)
    trials = [t for t in _PARSER.parse(base + runs[-1]) if t.type == "inline"] if runs else []
    if which < len(trials):
        trial = trials[which]
        if sum(t.type == "code_inline" for t in trial.children or []) > sum(
            t.type == "code_inline" for t in last.children or []
        ):
            code = runs[-1]
    env: dict = {}
    closing = [t for t in _PARSER.parse(base + code, env) if t.type == "inline"][which]
    markers = env.get("unclosed", {}).get(closing.content, [])
    return code + "".join("~~" if m == "~" else m for m in reversed(markers))


PIECES = [*"ab c*_`~[]()#>-|!\\&:\n1\t", "**", "``", "~~", "[r]", "[r]: https://e.example\n", "| a | b |\n|---|---|\n"]
TEXT = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@settings(max_examples=500, deadline=None)
@given(TEXT)
def test_closers_match_a_full_parse_of_the_last_block(text):
    base = text.rstrip()
    assert _closers(base) == _closers_by_full_parse(base)


def test_a_line_of_spaces_ending_otherwise_is_no_delimiter_row_and_costs_one_pass():
    old = re.compile(r"[ \t]*\|?[ \t:|-]*")  # the same strings, matched with quadratic backtracking
    for tail in ("", " ", " |", "|-:|", " \t|:--| ", " " * 50 + "x", "-|x", "a"):
        assert bool(_DELIMITER_ROW_START.fullmatch(tail)) == bool(old.fullmatch(tail)), tail
    assert stable_markdown("a |\n" + " " * 200_000 + "x").shown == 200_005


def test_a_last_line_of_backticks_is_shown_as_it_is():
    assert stable_markdown("``\n") == ("``\n", 3, 3)  # it raised IndexError


SECOND = (
    "## What changed\n\n"
    "1. The *limit* rose to **$7,500**\n"
    "2. The catch-up is _$1,100_ and ***both*** apply\n"
    "3. ~~Old rule~~ is gone \\*really\\* &amp; for good\n\n"
    "> Quoted line one  \n"
    '> line two with `code` and [a link](https://irs.example/a "IRS")\n\n'
    "See <https://irs.example/b> or ![the chart](https://irs.example/c.png).\n\n"
    "---\n\n"
    "| Year | Limit | Catch-up |\n"
    "| :--- | ---: | :---: |\n"
    "| 2025 | $7,000 | $1,000 |\n"
    "| 2026 | **$7,500** | $1,100 |\n\n"
    "    indented code\n\n"
    "~~~\nfenced with tildes\n~~~\n"
)


def shown(html: str) -> list[tuple[str, tuple[str, ...]]]:
    """Each character a render shows (white space aside), with the elements it sits in."""
    out: list[tuple[str, tuple[str, ...]]] = []

    def walk(node: Node, path: tuple[str, ...]) -> None:
        for child in node.children:
            if isinstance(child, str):
                out.extend((char, path) for char in child if not char.isspace())
            elif child.tag not in ("mark", "silvia-chip"):
                walk(child, (*path, child.tag))
            else:
                walk(child, path)

    walk(tree(html), ())
    return out


@pytest.mark.parametrize("answer", [overview_answer({})[0], SECOND], ids=["overview", "second"])
def test_every_prefix_shows_each_character_where_the_whole_answer_puts_it(answer):
    final = shown(render_answer(answer, [], account_names={}).html)
    for length in range(len(answer) + 1):
        partial = shown(render_answer(answer[:length], [], account_names={}, partial=True).html)
        assert partial == final[: len(partial)], f"after {answer[:length][-40:]!r}"
    assert partial == final


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("Pay **Cha", Stable("Pay **Cha**", 9, 9)),
        ("Pay **", Stable("Pay ", 4, 4)),
        ("a *b* and _c", Stable("a *b* and _c_", 12, 12)),
        ("run `sel", Stable("run `sel`", 8, 8)),
        ("x ~~old", Stable("x ~~old~~", 7, 7)),
        ("**bold\n", Stable("**bold**", 7, 6)),
        ("**bold\n\n", Stable("**bold\n\n", 8, 8)),
        ("Intro\n- ", Stable("Intro\n", 6, 6)),
        ("Intro\n-", Stable("Intro\n", 6, 6)),
        ("Intro\n12", Stable("Intro\n", 6, 6)),
        ("Intro\n| Account | Bal", Stable("Intro\n", 6, 6)),
        ("| Account | Balance |\n|--", Stable("", 0, 0)),
        ("| A | B |\n|---|---|\n", Stable("| A | B |\n|---|---|\n", 20, 20)),
        ("| A | B |\n|---|---|\n| x | 4,", Stable("| A | B |\n|---|---|\n| x | 4,", 28, 28)),
        ("See [the IRS](https://ir", Stable("See ", 4, 4)),
        ("See [the IRS]", Stable("See ", 4, 4)),
        ("See ![chart", Stable("See ", 4, 4)),
        ("Tom &am", Stable("Tom ", 4, 4)),
        ("a \\", Stable("a ", 2, 2)),
        ("see <https://ir", Stable("see ", 4, 4)),
        ("```py\nprint(", Stable("```py\nprint(", 12, 12)),
        ("```", Stable("", 0, 0)),
    ],
)
def test_what_is_held_back_and_what_is_closed(src, expected):
    assert stable_markdown(src) == expected


def test_a_citation_waits_until_its_text_is_shown():
    answer = "Pay **Chase** soon\n| a |"
    inline = [span(answer, "Chase", "bold"), span(answer, "| a |", "table")]
    rendered = render_answer(answer, inline, account_names={}, partial=True)
    assert [c.title for s in rendered.slots for c in s] == ["bold"]
    assert rendered.stray == ()


INLINE = st.lists(
    st.sampled_from(
        [
            *("word", "Chase", "**bold**", "*it*", "_it_", "`co de`", "~~old~~", "$7,500", "&amp;", "\\*", "a|b"),
            *("***x***", "**a *b* c**", "x!", "[link](https://e.example/y)", "<https://e.example>"),
            "![alt](https://e.example/i.png)",
        ]
    ),
    min_size=1,
    max_size=5,
).map(" ".join)
LINES = st.lists(INLINE, min_size=1, max_size=3)
BLOCK = st.one_of(
    INLINE,
    INLINE.map(lambda s: "## " + s),
    INLINE.map(lambda s: "> " + s),
    LINES.map(lambda lines: "\n".join("- " + line for line in lines)),
    LINES.map(lambda lines: "\n".join(f"{n}. {line}" for n, line in enumerate(lines, 1))),
    LINES.map(lambda lines: "| h | g |\n|---|---|\n" + "\n".join(f"| {line} | y |" for line in lines)),
    INLINE.map(lambda s: "```\n" + s + "\n```"),
)


def _tight(chars: list[tuple[str, tuple[str, ...]]]) -> list[tuple[str, tuple[str, ...]]]:
    # Two lists a blank line apart are one loose list: its items' text moves into paragraphs
    # only when that blank line comes (docs/pages.md#streaming names this exception).
    return [(c, tuple(t for i, t in enumerate(p) if not (t == "p" and i and p[i - 1] == "li"))) for c, p in chars]


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(BLOCK, min_size=1, max_size=4).map("\n\n".join))
def test_any_answer_of_common_blocks_shows_each_character_where_the_whole_answer_puts_it(answer):
    final = _tight(shown(render_answer(answer, [], account_names={}).html))
    for length in range(len(answer) + 1):
        partial = _tight(shown(render_answer(answer[:length], [], account_names={}, partial=True).html))
        assert partial == final[: len(partial)], f"after {answer[:length][-40:]!r}"


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="ab1#&<>:*_~`\\! \t.+-\u00e9\u2028\x1c", max_size=14))
def test_the_open_end_is_where_its_pattern_matches(line):
    # `_open_end_start` replaces `_OPEN_END.search`, quadratic in a line (a run of markers not at its end).
    match = _OPEN_END.search(line)
    assert _open_end_start(line) == (match.start() if match else -1)


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        # As many unfinished links as the bound: each held in turn, down to the text before them.
        ("Intro\nx " + "[" * _MAX_OPEN_ENDS, Stable("Intro\nx ", 8, 8)),
        # One more, and the whole line waits (each was a rescan of the line: 100,000 `[` took minutes).
        ("Intro\nx " + "[" * (_MAX_OPEN_ENDS + 1), Stable("Intro\n", 6, 6)),
        ("Intro\nx " + "[" * 100_000, Stable("Intro\n", 6, 6)),
        ("x [a](b)" + "\\!" * 50_000, Stable("", 0, 0)),
    ],
    ids=["at the bound", "past it", "100,000", "escapes after a link"],
)
def test_a_line_of_only_unfinished_ends_is_held_in_bounded_steps(src, expected):
    assert stable_markdown(src) == expected
