"""A streaming answer shows nothing it will later move or restyle (pages.streaming, docs/pages.md#streaming).

No database."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pages.markdown import render_answer
from pages.streaming import _MAX_OPEN_ENDS, _OPEN_END, Stable, _open_end_start, stable_markdown
from tests.markdown_answers import overview_answer
from tests.pages.test_markdown_citations import Node, span, tree

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
