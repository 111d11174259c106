"""pages.streaming: what a streaming step parses. The closers come from the block structure and the one
inline token they close, with the same result as parsing the last block whole (twice or three times, which
made a preview of a long table cost several renders); the delimiter-row pattern no longer backtracks.
No database."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from pages.streaming import _DELIMITER_ROW_START, _PARSER, _closers, _last_block, stable_markdown


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
