"""Citation support (SPEC 15, docs/support.md): does the cited source hold what the cited span states?

Pure: no ORM, no HTTP, no model. `citation_support` decides one inline
citation's `support` from three things the turn holds when the citation is
made: the cited span of the answer, the citation's `cited_text`, and the
texts of the `search_result` blocks this turn's tool calls wrote under the
citation's source (`SourceText`, one per block, in the order written).

- The quote: `cited_text` is looked for in each block, then in all of them
  joined in the order written, whitespace runs collapsed to one space on
  both sides (and the ends trimmed). Found nowhere: `unsupported`.
- The figures (`find_figures`): every number written in the span, each
  compared by magnitude at the precision written with the numbers of the
  cited text, their sums and their differences (`FigureMatcher`).
- The digest: `"sha256:<hex>"` of texts joined with `"\\n"` (UTF-8): those
  the quote was found in, else the first block written under the source.

Readers (the admin, pages, the source check) read a stored value with
`read_support`: a missing or malformed `support` reads as `unchecked`.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final, NamedTuple, TypeGuard

from citations.utf16 import utf16_length

__all__ = [
    "PARTLY_SUPPORTED",
    "SUBSET_LIMIT",
    "SUPPORTED",
    "SUPPORT_STATUSES",
    "UNCHECKED",
    "UNCHECKED_SUPPORT",
    "UNSUPPORTED",
    "CitationSupport",
    "Figure",
    "FigureMatcher",
    "SourceText",
    "Unmatched",
    "citation_support",
    "collapse_whitespace",
    "find_figures",
    "read_support",
    "source_digest",
    "support_status",
    "unmatched_figures",
]

SUPPORTED: Final = "supported"
PARTLY_SUPPORTED: Final = "partly_supported"
UNSUPPORTED: Final = "unsupported"
UNCHECKED: Final = "unchecked"
#: The statuses, in the order pages, the admin and the docs list them.
SUPPORT_STATUSES: Final = (SUPPORTED, PARTLY_SUPPORTED, UNSUPPORTED, UNCHECKED)

#: A cited text with at most this many numbers is searched for sums of any subset; above, runs of consecutive ones.
SUBSET_LIMIT: Final = 16

#: The `support` of a citation nothing can be checked against (a web search citation, a source no tool returned).
UNCHECKED_SUPPORT: Final[Mapping[str, Any]] = {"status": UNCHECKED, "unmatched": [], "digest": None}

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


# --- figures: what counts as a number --------------------------------------------------------------

_CURRENCY = "$€£¥₹"
_SIGNS = "-+\u2212"  # U+2212 is the minus sign
# Scales: a word after one space or none ("2.3 million"); a letter stuck to the number ("$2.3M"), which
# counts only with a currency symbol or a decimal point: "401k" and "3M" name a plan and a company.
_WORD_SCALES = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_LETTER_SCALES = {"k": 3, "K": 3, "M": 6, "mn": 6, "B": 9, "bn": 9}
_NUMBER = re.compile(
    r"(?=[$€£¥₹U.0-9])(?<!\w)"  # where a figure can start, not inside a word: the engine skips the rest quickly
    r"(?:(?P<currency>(?:US)?[$€£¥₹])(?P<sign>[-+\u2212])?)?"  # "$-5"; a sign before it is read apart
    r"(?:(?P<int>[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+)(?:\.(?P<frac>[0-9]+))?|\.(?P<bare>[0-9]+))"
    r"(?:e(?P<exp>[-+][0-9]{1,3}))?"  # as Python prints a float: 1e-05, 1.5e+20
    r"(?:(?P<letter>k|K|M|mn|B|bn)|\s?(?P<word>thousand|million|billion|trillion))?"
    r"(?P<percent>\s?%|\spercent\b)?"
    r"(?!\w)"  # nor ending inside one ("j1m4", "401k" aside: a letter scale is read, then refused)
)
_DIGIT = re.compile("[0-9]")
_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?"
)
# What holds no figure (its `mask` group): a date's month and day (its year stays a figure), a time, a list
# item's marker at a line's start. Each group of patterns is tried only when the text holds what they need (a
# quick scan with a literal start, which the regular expression engine searches fast): most texts hold none.
_NOT_FIGURES: tuple[tuple[re.Pattern[str], tuple[re.Pattern[str], ...]], ...] = tuple(
    (re.compile(hint), tuple(re.compile(pattern) for pattern in patterns))
    for hint, patterns in (
        (
            "[0-9][-/:][0-9]",
            (
                r"(?<![\w.-])[0-9]{4}(?P<mask>-(?:0[1-9]|1[0-2])(?:-(?:0[1-9]|[12][0-9]|3[01]))?"  # 2025-01-15
                r"(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?(?:Z|[-+][0-9]{2}:?[0-9]{2})?)?)(?![\w-])",
                r"(?<![\w./])(?P<mask>[0-9]{1,2}/[0-9]{1,2}/)[0-9]{4}(?![\w/])",  # 1/15/2025
                r"(?<![\w./])(?P<mask>[0-9]{1,2}/[0-9]{1,2}/[0-9]{2})(?![\w/])",  # 1/15/25
                r"(?<![\w:.])(?P<mask>[0-9]{1,2}:[0-9]{2}(?::[0-9]{2})?)(?![\w:])",  # 10:30
            ),
        ),
        (
            "[JFMASOND][aepuco][nbrylgptvc]",
            (
                r"\b" + _MONTH + r" (?P<mask>[0-9]{1,2}(?:st|nd|rd|th)?)\b(?![:.,][0-9])",  # January 15
                r"\b(?P<mask>[0-9]{1,2}(?:st|nd|rd|th)?) (?:of )?" + _MONTH + r"\b",  # 15 January
            ),
        ),
        ("(?m:^)[ \t]*[0-9]{1,3}[.)][ \t]", (r"(?m)^[ \t]*(?P<mask>[0-9]{1,3}[.)])(?=[ \t])",)),  # a list marker
    )
)


class Figure(NamedTuple):
    """One number written in a text (docs/support.md#what-is-a-number).

    `text` as written (sign, currency symbol, separators, scale and `%`
    included), `start`/`end` its `str` indices in the text (end exclusive).
    Its magnitude is `mantissa * 10**unit` (never negative: the sign is not
    checked), `10**unit` being what its last written digit is worth in its
    scale (`$2,318` has unit 0, `2.30%` unit -2, `$2.3M` unit 5); it stands
    for any value within half of that.
    """

    text: str
    start: int
    end: int
    mantissa: int
    unit: int


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _word_after(text: str, at: int) -> str:
    end = at
    while end < len(text) and _is_word(text[end]):
        end += 1
    return text[at:end]


def _word_before(text: str, at: int) -> str:
    start = at
    while start > 0 and _is_word(text[start - 1]):
        start -= 1
    return text[start:at]


def _is_identifier_part(text: str, start: int, end: int) -> bool:
    """Whether the number at `text[start:end]` is part of a longer name (docs/support.md#what-is-a-number).

    An account id, a UUID, a ticker or a version (`j1m4`, `550e8400-e29b`,
    `0700.HK`, `1.2.3`), a name with a number (`FY2024`, `W-2`, `1099-INT`,
    `401(k)`), an ordinal (`1st`), a JSON key (`"2024":`).
    """
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    after2 = text[end + 1] if end + 1 < len(text) else ""
    if _is_word(before) or _is_word(after):
        return True
    if before == "-" and start >= 2 and _is_word(text[start - 2]):
        # A hyphen after a word: a range after a number ("5-10"), a name after one with letters ("W-2", "e29b-41d4").
        return not _word_before(text, start - 1).isdigit()
    if before == "." and start >= 2 and _is_word(text[start - 2]):
        return True  # "v1.2", the last part of "1.2.3"
    if after in ".," and _is_word(after2):
        return after == "." or not after2.isdigit()  # "0700.HK", "1.2.3"; "1,2" is a list
    if after == "-" and _is_word(after2):
        word = _word_after(text, end + 1)
        return not (word.isdigit() or (word.isalpha() and word.islower()))  # "5-10", "30-year"; not "590-A"
    if after == "(" and _is_word(after2):
        return True  # "401(k)", "1026.43(a)"
    if before == '"' and after == '"':
        return text[end + 1 :].lstrip(" ")[:1] == ":"  # a JSON key
    return False


def _masked(text: str) -> list[tuple[int, int]]:
    """The spans of `text` that hold no figure, in order: dates' months and days, times, list markers."""
    spans = []
    for hint, patterns in _NOT_FIGURES:
        if hint.search(text):
            spans += [match.span("mask") for pattern in patterns for match in pattern.finditer(text)]
    return sorted(spans)


def _sign_before(text: str, at: int) -> bool:
    """Whether `text[at - 1]` is a sign of the number at `at` (a dash after a word or number is a hyphen or a range)."""
    return at > 0 and text[at - 1] in _SIGNS and not (at > 1 and (_is_word(text[at - 2]) or text[at - 2] in ".,"))


# Characters beside a number that may make it part of a name (`_is_identifier_part` decides: before it, or
# after it and followed by a word character); a word character beside it never lets it match (`_NUMBER`).
_NAME_BEFORE = frozenset('-."')
_NAME_AFTER = frozenset('.,-("')


def find_figures(text: str) -> list[Figure]:
    """The numbers written in `text`, in order (docs/support.md#what-is-a-number).

    Amounts, counts, percentages and years, with their sign, currency symbol
    (`$ € £ ¥ ₹`, `US$`), thousands separators (`2,318.45`), decimals and
    scale (`k`/`K`/`M`/`mn`/`B`/`bn` stuck to a number with a currency symbol
    or a decimal point; `thousand`, `million`, `billion`, `trillion`), and a
    `%` or `percent` after it. Not figures: digits inside a name (ids, UUIDs,
    tickers, versions, `401(k)`, `FY2024`, `W-2`, ordinals, JSON keys), a
    date's month and day (its year is one), times, a list item's marker,
    numbers written in words. Never raises.
    """
    if not _DIGIT.search(text):
        return []
    holes = _masked(text)
    figures = (_figure_of(match, text, holes) for match in _NUMBER.finditer(text))
    return [figure for figure in figures if figure is not None]


def _figure_of(match: re.Match[str], text: str, holes: list[tuple[int, int]]) -> Figure | None:
    """The figure a `_NUMBER` match of `text` wrote (its sign included), or None when it is none: inside a date,
    a time or a list marker (`holes`), part of a name, a letter scale without a currency symbol or a decimal
    point (`401k`, `3M`). Its groups are read by position (`_NUMBER`'s order): it runs for every number of
    every cited text and span (bench/support.py)."""
    start, end = match.span()
    if holes and any(low < end and start < high for low, high in holes):
        return None
    size = len(text)
    beside_a_name = (start and text[start - 1] in _NAME_BEFORE) or (
        end + 1 < size and text[end] in _NAME_AFTER and (text[end + 1].isalnum() or text[end + 1] == "_")
    )
    if beside_a_name and _is_identifier_part(text, start, end):
        return None
    currency, _, digits, fraction, bare, exponent, letter, word, _ = match.groups()
    fraction = fraction or bare or ""
    unit = -len(fraction)
    if letter:
        if not (fraction or currency):
            return None
        unit += _LETTER_SCALES[letter]
    elif word:
        unit += _WORD_SCALES[word]
    if exponent:
        unit += int(exponent)
    if start and text[start - 1] in _SIGNS and _sign_before(text, start):
        start -= 1
    if digits and "," in digits:
        digits = digits.replace(",", "")
    return Figure(text[start:end], start, end, int((digits or "") + fraction), unit)


def _found_as_written(figure: Figure, text: str) -> bool:
    """Whether a number of `text` equal to `figure` at its precision is found by looking where `figure`'s
    whole part is written (`7500` or `7,500`, a currency symbol before it or not): a quick way to the answer
    `FigureMatcher` gives for a copied or rounded figure.

    A place where `find_figures` would start a number (not right after a word character, a decimal point, a
    thousands separator or an exponent's sign) gives the number read there, as it reads it: a witness. False
    says nothing (the caller asks `FigureMatcher`); tests/citations/test_support.py ties the two.
    """
    whole = figure.mantissa // 10**-figure.unit if figure.unit < 0 else figure.mantissa * 10**figure.unit
    holes: list[tuple[int, int]] | None = None
    tries = 0
    for digits in (str(whole), f"{whole:,}") if whole >= 1000 else (str(whole),):
        at = text.find(digits)
        while at >= 0 and tries < 8:
            tries += 1
            start = at
            if start and text[start - 1] in _CURRENCY:
                start -= 3 if text[start - 3 : start - 1] == "US" else 1
            before = text[start - 1] if start > 0 else ""
            starts_a_number = not before or not (
                before.isalnum() or before in "_.," or (before in _SIGNS and text[start - 2 : start - 1] == "e")
            )
            match = _NUMBER.match(text, start) if starts_a_number else None
            if match is not None:
                holes = _masked(text) if holes is None else holes
                cited = _figure_of(match, text, holes)
                if cited is not None and _within(cited, figure):
                    return True
            at = text.find(digits, at + 1)
    return False


def _within(cited: Figure, figure: Figure) -> bool:
    """Whether `cited`'s magnitude is within half a unit of `figure`'s last written digit (inclusive)."""
    scale = min(cited.unit, figure.unit - 1)
    value = figure.mantissa * 10 ** (figure.unit - scale)
    return abs(cited.mantissa * 10 ** (cited.unit - scale) - value) <= 5 * 10 ** (figure.unit - 1 - scale)


# --- matching a figure of the span against the cited text --------------------------------------------


class FigureMatcher:
    """The numbers of one cited text, asked whether a figure of the span is one of them, their sum or a
    difference (docs/support.md#the-figures).

    A figure written with its last digit worth `10**unit` matches a value
    within half of that, inclusive (`$2,318` matches 2318.45 and 2318.5;
    `$2,300` does not match 2318.45): right whichever way the writer rounded.
    Values: the cited figures' magnitudes; a sum is of two or more of them
    (any subset when there are at most `SUBSET_LIMIT`, else runs of
    consecutive ones); a difference is of two. All arithmetic is on exact
    integers (units of `10**scale`).
    """

    def __init__(self, cited: Sequence[Figure]) -> None:
        self._cited = list(cited)
        self._finest = min((figure.unit for figure in self._cited), default=0)
        self._scale: int | None = None
        self._values: list[int] = []
        self._sorted: list[int] = []
        self._sums: list[int] | None = None  # sorted subset sums, or the prefix sums of runs

    def _rescale(self, scale: int) -> None:
        self._scale = scale
        self._values = [figure.mantissa * 10 ** (figure.unit - scale) for figure in self._cited]
        self._sorted = sorted(self._values)
        self._sums = None

    def matches(self, figure: Figure) -> bool:
        """Whether `figure` is, at its precision, a cited number, a sum of two or more or a difference of two."""
        scale = min(figure.unit - 1, self._finest)
        if self._scale is None or scale < self._scale:
            self._rescale(scale)
        assert self._scale is not None
        value = figure.mantissa * 10 ** (figure.unit - self._scale)
        half = 5 * 10 ** (figure.unit - 1 - self._scale)
        low, high = value - half, value + half
        return self._copied(low, high) or self._difference(low, high) or self._sum(low, high)

    def _copied(self, low: int, high: int) -> bool:
        at = bisect.bisect_left(self._sorted, low)
        return at < len(self._sorted) and self._sorted[at] <= high

    def _difference(self, low: int, high: int) -> bool:
        values = self._sorted
        for i, smaller in enumerate(values):
            at = bisect.bisect_left(values, smaller + low, lo=i + 1)
            if at < len(values) and values[at] - smaller <= high:
                return True
        return False

    def _sum(self, low: int, high: int) -> bool:
        if len(self._values) < 2:
            return False
        if len(self._values) <= SUBSET_LIMIT:
            if self._sums is None:
                self._sums = sorted(_subset_sums(self._values))
            at = bisect.bisect_left(self._sums, low)
            return at < len(self._sums) and self._sums[at] <= high
        if self._sums is None:
            self._sums = [0]
            for value in self._values:
                self._sums.append(self._sums[-1] + value)
        prefix = self._sums  # non-decreasing: magnitudes are never negative
        for i in range(len(prefix) - 2):
            at = bisect.bisect_left(prefix, prefix[i] + low, lo=i + 2)
            if at < len(prefix) and prefix[at] - prefix[i] <= high:
                return True
        return False


def _subset_sums(values: Sequence[int]) -> list[int]:
    """The sums of every subset of two or more of `values` (2**n - n - 1 of them)."""
    singles: list[int] = []
    several: list[int] = []
    for value in values:
        several += [total + value for total in singles] + [total + value for total in several]
        singles.append(value)
    return several


# --- the quote and the digest ---------------------------------------------------------------------------


def collapse_whitespace(text: str) -> str:
    """`text` with each run of whitespace (any Unicode space, newlines) made one space, ends trimmed."""
    return " ".join(text.split())


def source_digest(texts: Sequence[str]) -> str:
    """`"sha256:<hex>"` of `texts` joined with `"\\n"`, as UTF-8. Raises `UnicodeEncodeError` on a lone surrogate."""
    return "sha256:" + hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()


class SourceText:
    """The texts of one `search_result` block (a list of str, as `SearchResult.texts`), read when first asked.

    `texts` may be any sequence, a lazy one included (a SQL block renders its
    rows on first read); the joined and collapsed forms and the digest are
    computed once, when first needed.
    """

    def __init__(self, texts: Sequence[str]) -> None:
        self._texts = texts

    @cached_property
    def texts(self) -> tuple[str, ...]:
        return tuple(self._texts)

    @cached_property
    def joined(self) -> str:
        """The texts joined with `"\\n"`: what the digest is of."""
        return "\n".join(self.texts)

    @cached_property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.joined.encode("utf-8")).hexdigest()

    @cached_property
    def _collapsed(self) -> str:
        return collapse_whitespace(self.joined)

    @cached_property
    def _glued(self) -> str:
        return collapse_whitespace("".join(self.texts))

    def holds(self, quote: str) -> bool:
        """Whether the collapsed, non-empty `quote` is in the block's texts, joined and collapsed.

        Anthropic does not say what joins the texts of a multi-text citation
        (docs/support.md#the-quote): a newline, then nothing, are tried. (A
        quote found as written in `joined` is in it collapsed too: callers
        look there first.)
        """
        return quote in self._collapsed or (len(self.texts) > 1 and quote in self._glued)


# --- one citation's support -------------------------------------------------------------------------------


def citation_support(
    *, span: str, span_start: int, cited_text: str, blocks: Sequence[SourceText]
) -> dict[str, Any] | None:
    """The `support` of one inline citation (SPEC 15, docs/support.md): `{"status", "unmatched", "digest"}`.

    `span` is the cited span of the answer and `span_start` its offset in the
    stored answer (UTF-16 code units); `blocks` the texts of the
    `search_result` blocks this turn's tool calls wrote under the citation's
    source, in the order written. No block: `unchecked` (digest null). The
    quote (collapsed `cited_text`) is looked for in each block, then in all
    of them joined in the order written. Found: `supported` when every
    figure of the span matches (`FigureMatcher`), else `partly_supported`
    listing the others; the digest of the text it was found in. Found
    nowhere, or empty: `unsupported`, every figure of the span in
    `unmatched`, the first block's digest. `unmatched` entries are `{"text", "start",
    "end"}`, offsets in the stored answer (UTF-16, end exclusive).

    None when it cannot be computed (a block that is not UTF-8 text): the
    citation then keeps no `support` key rather than a wrong one.
    """
    if not blocks:
        return dict(UNCHECKED_SUPPORT, unmatched=[])
    found = _found_in(cited_text, blocks) if cited_text and not cited_text.isspace() else None
    figures = find_figures(span)
    if found is None:
        status, unmatched = UNSUPPORTED, figures
    else:
        unmatched = unmatched_figures(figures, cited_text)
        status = PARTLY_SUPPORTED if unmatched else SUPPORTED
    try:
        digest = (found or blocks[0]).digest
    except UnicodeEncodeError:
        return None
    return {"status": status, "unmatched": _offsets(span, span_start, unmatched), "digest": digest}


def unmatched_figures(figures: Sequence[Figure], cited_text: str) -> list[Figure]:
    """The figures of a span that are, at their precision, neither a number of `cited_text` nor a sum of two
    or more of them nor a difference of two (`FigureMatcher`), in order.

    A figure found where its digits are written (`_found_as_written`) is matched without reading the whole
    cited text; the others are asked of `FigureMatcher`, which reads it once.
    """
    rest = [figure for figure in figures if not _found_as_written(figure, cited_text)]
    if not rest:
        return []
    matcher = FigureMatcher(find_figures(cited_text))
    return [figure for figure in rest if not matcher.matches(figure)]


def _found_in(cited_text: str, blocks: Sequence[SourceText]) -> SourceText | None:
    """The first block holding the quote (`cited_text` as written, else collapsed); else, when it runs across
    blocks of the source, all of them joined in the order written; else None."""
    quote: str | None = None
    for block in blocks:
        if cited_text in block.joined:
            return block
    quote = collapse_whitespace(cited_text)
    for block in blocks:
        if block.holds(quote):
            return block
    if len(blocks) > 1:
        whole = SourceText([text for block in blocks for text in block.texts])
        if cited_text in whole.joined or whole.holds(quote):
            return whole
    return None


def _offsets(span: str, span_start: int, figures: Sequence[Figure]) -> list[dict[str, Any]]:
    out, units, at = [], span_start, 0
    for figure in figures:
        units += utf16_length(span[at : figure.start])
        start = units
        units += utf16_length(figure.text)
        at = figure.end
        out.append({"text": figure.text, "start": start, "end": units})
    return out


# --- reading a stored support ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unmatched:
    """A figure of the span found in neither way: its text and UTF-16 offsets in the stored answer."""

    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class CitationSupport:
    """A stored `support`, read (SPEC 15): `status`, `unmatched` figures, `digest` (`"sha256:<hex>"` or None)."""

    status: str
    unmatched: tuple[Unmatched, ...]
    digest: str | None


def read_support(value: object) -> CitationSupport | None:
    """A stored `support` value, or None when it is malformed (readers take None as `unchecked`).

    Well formed: an object with a known `status`, an `unmatched` list of
    `{"text": str, "start": int, "end": int}` with `0 <= start <= end`, and a
    `digest` that is `"sha256:"` and 64 lower-case hex digits, or null.
    Unknown extra keys are ignored. Never raises.
    """
    if not isinstance(value, Mapping):
        return None
    status, unmatched, digest = value.get("status"), value.get("unmatched"), value.get("digest")
    if status not in SUPPORT_STATUSES or not isinstance(unmatched, list):
        return None
    if digest is not None and not (isinstance(digest, str) and _DIGEST.fullmatch(digest)):
        return None
    figures = []
    for item in unmatched:
        if not isinstance(item, Mapping):
            return None
        text, start, end = item.get("text"), item.get("start"), item.get("end")
        if not (isinstance(text, str) and _is_int(start) and _is_int(end) and 0 <= start <= end):
            return None
        figures.append(Unmatched(text, start, end))
    return CitationSupport(status, tuple(figures), digest)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def support_status(citation: object) -> str:
    """The support status of one stored inline citation: its `support`'s, `unchecked` when missing or malformed."""
    support = read_support(citation.get("support")) if isinstance(citation, Mapping) else None
    return UNCHECKED if support is None else support.status
