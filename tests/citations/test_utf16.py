"""`citations.utf16`: offsets in UTF-16 code units (docs/turns.md). Pure: no database."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from citations.utf16 import utf16_index, utf16_length, utf16_slice, utf16_splits_character

TEXT = "💳 ab𝄞c"  # 💳 and 𝄞 are two units each: 💳=0-2, " "=2, a=3, b=4, 𝄞=5-7, c=7


@pytest.mark.parametrize(
    ("text", "units"), [("", 0), ("abc", 3), ("é", 1), ("💳", 2), ("a💳b📈", 6), ("日本", 2), (TEXT, 8)]
)
def test_length_counts_code_units(text, units):
    assert utf16_length(text) == units


def _boundaries(text):
    """utf16_index as a table: every offset that names a place between two characters."""
    index = utf16_index(text)
    return {offset: index(offset) for offset in range(utf16_length(text) + 1) if index(offset) is not None}


def test_index_maps_every_offset_between_two_characters():
    assert _boundaries(TEXT) == {0: 0, 2: 1, 3: 2, 4: 3, 5: 4, 7: 5, 8: 6}
    assert _boundaries("") == {0: 0}
    index = utf16_index(TEXT)
    assert [index(offset) for offset in (-1, 1, 6, 9)] == [None, None, None, None]


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [(0, 2, "💳"), (3, 5, "ab"), (5, 7, "𝄞"), (0, 8, TEXT), (8, 8, ""), (0, 9, None), (3, 2, None), (-1, 2, None)],
)
def test_slice_counts_code_units(start, end, expected):
    assert utf16_slice(TEXT, start, end) == expected


def test_a_bound_inside_a_pair_gives_the_replacement_character_for_the_split_half():
    assert utf16_slice(TEXT, 1, 4) == "\ufffd a"
    assert utf16_slice(TEXT, 4, 6) == "b\ufffd"
    assert [offset for offset in range(-1, 10) if utf16_splits_character(TEXT, offset)] == [1, 6]


@given(st.text())
def test_length_boundaries_and_splits_agree_with_the_utf16_encoding(text):
    encoded = text.encode("utf-16-le", errors="surrogatepass")
    assert utf16_length(text) == len(encoded) // 2
    bounds = _boundaries(text)
    assert max(bounds) == utf16_length(text) and bounds[max(bounds)] == len(text)
    for offset in range(utf16_length(text) + 1):
        if offset in bounds:
            assert text[: bounds[offset]].encode("utf-16-le", errors="surrogatepass") == encoded[: offset * 2]
        assert utf16_splits_character(text, offset) is (offset not in bounds)


@given(st.text(), st.integers(-2, 30), st.integers(-2, 30))
def test_slice_between_boundaries_is_the_python_slice(text, start, end):
    bounds = _boundaries(text)
    got = utf16_slice(text, start, end)
    if not 0 <= start <= end <= utf16_length(text):
        assert got is None
    elif start in bounds and end in bounds:
        assert got == text[bounds[start] : bounds[end]]
    elif start == end:
        assert got == ""
    else:  # a bound inside a pair: its half is U+FFFD
        assert got is not None and "\ufffd" in got
