"""Offsets in UTF-16 code units: the unit of every inline citation's `start`/`end` (docs/turns.md).

A stored answer is a Python `str` (code points); its citation spans count
UTF-16 code units, what JavaScript's `length` counts: a character outside the
Basic Multilingual Plane (an emoji, 𝄞) is two units, a surrogate pair. Every
module that turns a span into text asks here. Pure, and nothing raises on any
`str`: a lone surrogate (which a stored answer cannot hold) counts as one unit.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

__all__ = ["utf16_index", "utf16_length", "utf16_slice", "utf16_splits_character"]

_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def utf16_length(text: str) -> int:
    """Length of `text` in UTF-16 code units (what JavaScript's `length` counts)."""
    if text.isascii():  # most text: one unit a character, asked at C speed
        return len(text)
    # Characters outside the BMP take two units; count them instead of encoding.
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def utf16_index(text: str) -> Callable[[int], int | None]:
    """A function from a UTF-16 offset in `text` to its `str` index: None past the ends or inside a pair.

    Characters outside the BMP take two units: the k-th of them starts at
    unit `index + k`, so one bisect over their positions converts an offset
    (no table per character: a page converts every span of every answer).
    """
    starts = [match.start() + k for k, match in enumerate(_ASTRAL.finditer(text))]
    units = len(text) + len(starts)

    def index(offset: int) -> int | None:
        if not 0 <= offset <= units:
            return None
        before = bisect.bisect_left(starts, offset)  # pairs starting before `offset`
        if before and starts[before - 1] + 1 == offset:
            return None  # between the two halves of a pair
        return offset - before

    return index


def utf16_splits_character(text: str, offset: int) -> bool:
    """Whether `offset` (UTF-16 units) falls between the two halves of a surrogate pair of `text`."""
    # Encoded once (C speed): the admin asks this for every span of a long answer.
    units = text.encode("utf-16-le", errors="surrogatepass")
    if not 0 < offset < len(units) // 2:
        return False
    before = int.from_bytes(units[offset * 2 - 2 : offset * 2], "little")
    after = int.from_bytes(units[offset * 2 : offset * 2 + 2], "little")
    return 0xD800 <= before <= 0xDBFF and 0xDC00 <= after <= 0xDFFF


def utf16_slice(text: str, start: int, end: int) -> str | None:
    """`text[start:end]` counted in UTF-16 code units (end exclusive), or None.

    None when the span is not `0 <= start <= end <= utf16_length(text)`. A
    bound inside a surrogate pair yields U+FFFD for the split half instead of
    raising.
    """
    units = text.encode("utf-16-le", errors="surrogatepass")
    if not 0 <= start <= end <= len(units) // 2:
        return None
    return units[start * 2 : end * 2].decode("utf-16-le", errors="replace")
