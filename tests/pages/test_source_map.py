"""pages.source_map: the alignment that places a table cell's or a tab-expanded line's characters reads each
line a bounded number of times (a 240,000-character cell of words took minutes), with the same result as
the search per character it replaces. No database."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pages.source_map import _align, _cell_segments, _Lines


def _align_by_search(text: str, raw: str, lo: int, hi: int) -> list[int]:
    """The rule with a fresh search per character (what `_align` did, quadratic in the line)."""
    out, cursor = [], lo
    for index, char in enumerate(text):
        found = raw.find(char, cursor, hi)
        if char == " ":
            tab = raw.find("\t", cursor, hi)
            if tab >= 0 and (found < 0 or tab < found):
                out.append(tab)
                cursor = tab if text[index + 1 : index + 2] == " " else tab + 1
                continue
        if found < 0:
            out.append(max(lo, min(cursor, hi - 1)))
            continue
        out.append(found)
        cursor = found + 1
    return out


PIECES = st.text(alphabet=" \tab|\\x-", max_size=30)


@settings(max_examples=500, deadline=None)
@given(PIECES, PIECES, st.integers(0, 5), st.integers(0, 5))
def test_align_matches_a_search_per_character(text, raw, lo, cut):
    hi = max(lo, len(raw) - cut)
    assert _align(text, raw, lo, hi) == _align_by_search(text, raw, lo, hi)


def test_a_row_is_split_into_cells_once_however_many_cells_ask():
    row = "|" + " a |" * 5
    lines = _Lines(f"x\n{row}")
    assert lines.cells(1) == _cell_segments(row) == [(1, 4), (5, 8), (9, 12), (13, 16), (17, 20)]
    assert lines.cells(1) is lines.cells(1)
