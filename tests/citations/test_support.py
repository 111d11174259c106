"""`citations.support` (SPEC 15, docs/support.md): what is a number, the figures' matching, the quote, the digest and
a stored support read back. Table-driven from `tests/vectors/support.json` and `support_figures.json` (computed by
hand) and hypothesis properties. Pure: no database."""

from __future__ import annotations

import hashlib
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from citations.support import (
    SUBSET_LIMIT,
    UNCHECKED,
    CitationSupport,
    FigureMatcher,
    SourceText,
    Unmatched,
    citation_support,
    find_figures,
    read_support,
    support_status,
    unmatched_figures,
)
from citations.utf16 import utf16_length, utf16_slice
from tests.cases import golden_params, load_cases

SUPPORT = load_cases("support.json")
FIGURES = load_cases("support_figures.json")


def _digest(texts):
    return "sha256:" + hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()


@pytest.mark.parametrize("case", golden_params(SUPPORT))
def test_support_of_a_case(case):
    blocks = case["blocks"]
    support = citation_support(
        span=case["span"],
        span_start=case["span_start"],
        cited_text=case["cited_text"],
        blocks=[SourceText(texts) for texts in blocks],
    )
    digest_of = case["expect"]["digest_of"]
    if digest_of is None:
        digest = None
    else:
        digest = _digest([text for block in blocks for text in block] if digest_of == "all" else blocks[digest_of])
    assert support == {"status": case["expect"]["status"], "unmatched": case["expect"]["unmatched"], "digest": digest}


@pytest.mark.parametrize("case", golden_params(FIGURES))
def test_figures_of_a_text(case):
    figures = find_figures(case["text"])
    assert [
        {"text": f.text, "value": Decimal(f.mantissa).scaleb(f.unit), "unit": Decimal(1).scaleb(f.unit)}
        for f in figures
    ] == [{**want, "value": Decimal(want["value"]), "unit": Decimal(want["unit"])} for want in case["figures"]]
    assert all(case["text"][f.start : f.end] == f.text for f in figures)


def test_a_digest_is_of_the_texts_joined_with_a_newline_in_utf8():
    # Computed apart: printf 'é\n2' | sha256sum
    text = SourceText(["é", "2"])
    assert text.digest == "sha256:" + hashlib.sha256("é\n2".encode()).hexdigest()
    assert text.digest.startswith("sha256:") and len(text.digest) == 71


def test_a_lone_surrogate_in_a_block_gives_no_support_rather_than_a_wrong_one():
    assert citation_support(span="$5", span_start=0, cited_text="x: 5", blocks=[SourceText(["x: 5 \ud800"])]) is None


# --- read back ----------------------------------------------------------------------------------------------------

GOOD = {
    "status": "partly_supported",
    "unmatched": [{"text": "$3", "start": 4, "end": 6}],
    "digest": "sha256:" + "a" * 64,
}


def test_a_stored_support_reads_back():
    assert read_support(GOOD) == CitationSupport("partly_supported", (Unmatched("$3", 4, 6),), "sha256:" + "a" * 64)
    assert read_support({"status": "unchecked", "unmatched": [], "digest": None, "later": 1}) is not None
    assert support_status({"support": GOOD}) == "partly_supported"


@pytest.mark.parametrize(
    "value",
    [
        None,
        "supported",
        [],
        {**GOOD, "status": "Supported"},
        {**GOOD, "status": None},
        {**GOOD, "unmatched": None},
        {**GOOD, "unmatched": [{"text": "$3", "start": 6, "end": 4}]},
        {**GOOD, "unmatched": [{"text": "$3", "start": True, "end": 4}]},
        {**GOOD, "unmatched": [{"text": 3, "start": 1, "end": 4}]},
        {**GOOD, "unmatched": ["$3"]},
        {**GOOD, "digest": "sha256:" + "A" * 64},
        {**GOOD, "digest": "md5:abc"},
        {key: value for key, value in GOOD.items() if key != "digest"} | {"digest": 5},
    ],
)
def test_a_malformed_support_reads_as_unchecked(value):
    assert read_support(value) is None
    assert support_status({"support": value}) == UNCHECKED


def test_a_citation_without_support_reads_as_unchecked():
    assert support_status({"source": "s"}) == UNCHECKED
    assert support_status("not a citation") == UNCHECKED


# --- properties ---------------------------------------------------------------------------------------------------


def write(value: Decimal, *, separators: bool, currency: bool, negative: bool = False) -> str:
    """`value` as an answer or a row might write it: every digit of it kept."""
    text = f"{value:,f}" if separators else f"{value:f}"
    text = ("$" if currency else "") + text
    return ("-" if negative else "") + text


amounts = st.decimals(min_value=0, max_value=10**9, places=2, allow_nan=False, allow_infinity=False)
styles = st.fixed_dictionaries({"separators": st.booleans(), "currency": st.booleans(), "negative": st.booleans()})


PLAIN = {"separators": False, "currency": False}


def _cited(values, cited_styles):
    return "; ".join(f"value: {write(v, **style)}" for v, style in zip(values, cited_styles, strict=True))


def _support(span, cited):
    return citation_support(span=span, span_start=0, cited_text=cited, blocks=[SourceText([cited])])


@given(data=st.data(), values=st.lists(amounts, min_size=1, max_size=20))
def test_a_number_copied_from_the_cited_text_is_always_matched(data, values):
    cited = _cited(values, [data.draw(styles) for _ in values])
    copied = data.draw(st.sampled_from(values))
    span = f"That is {write(copied, **data.draw(styles))} now."
    assert _support(span, cited) == {"status": "supported", "unmatched": [], "digest": _digest([cited])}


@given(
    data=st.data(),
    values=st.lists(amounts, min_size=1, max_size=6),
    places=st.integers(min_value=0, max_value=1),
    rounding=st.sampled_from([ROUND_HALF_UP, ROUND_HALF_EVEN]),
)
def test_a_number_rounded_either_way_is_matched(data, values, places, rounding):
    cited = _cited(values, [data.draw(styles) for _ in values])
    rounded = data.draw(st.sampled_from(values)).quantize(Decimal(1).scaleb(-places), rounding=rounding)
    assert _support(f"about {write(rounded, **data.draw(styles))}", cited)["status"] == "supported"


@given(data=st.data(), count=st.integers(min_value=2, max_value=SUBSET_LIMIT))
def test_a_sum_of_any_subset_of_up_to_16_numbers_is_matched(data, count):
    values = data.draw(st.lists(amounts, min_size=count, max_size=count))
    chosen = data.draw(st.lists(st.sampled_from(range(count)), min_size=2, max_size=count, unique=True))
    total = sum((values[i] for i in chosen), Decimal(0))
    assert _support(f"{write(total, separators=True, currency=True)} in all", _cited(values, [PLAIN] * count))[
        "status"
    ] == ("supported")


@given(
    data=st.data(),
    decades=st.lists(
        st.tuples(st.integers(min_value=10, max_value=19), st.integers(min_value=0, max_value=99)),
        min_size=1,
        max_size=5,
    ),
    places=st.integers(min_value=0, max_value=2),
    delta=st.integers(min_value=-9, max_value=9).filter(bool),
)
def test_a_number_changed_in_its_last_written_digit_is_never_matched(data, decades, places, delta):
    """The cited numbers lie in decades 1000x apart (10 to 19.99, 10,000 to 19,999.99, ...): a sum or a
    difference that involves another number is then off by at least 10 from any of them, and a changed
    last digit moves a number by at most 9 units of at most 1, so nothing else can match by accident."""
    scale = Decimal(1).scaleb(-places)
    values = [
        (Decimal(lead) * Decimal(1000) ** i + Decimal(frac) / 100).quantize(scale, rounding=ROUND_HALF_UP)
        for i, (lead, frac) in enumerate(decades)
    ]
    target = data.draw(st.sampled_from(values))
    last = int(f"{target:f}"[-1])
    assume(0 <= last + delta <= 9)
    changed = target + delta * scale
    style = data.draw(styles)
    assert write(changed, **style)[:-1] == write(target, **style)[:-1]  # only the last digit differs
    span = f"It is {write(changed, **style)}."
    support = _support(span, _cited(values, [data.draw(styles) for _ in values]))
    assert support["status"] == "partly_supported"
    assert [item["text"] for item in support["unmatched"]] == [write(changed, **style)]


@given(prefix=st.text(max_size=20), span=st.text(max_size=60), cited=st.text(max_size=60))
def test_support_never_raises_and_its_offsets_slice_the_answer_to_each_figure(prefix, span, cited):
    answer = prefix + span
    support = citation_support(
        span=span, span_start=utf16_length(prefix), cited_text=cited, blocks=[SourceText([cited])]
    )
    if support is None:  # only a lone surrogate makes it uncomputable
        assert any(0xD800 <= ord(char) <= 0xDFFF for char in cited)
        return
    for item in support["unmatched"]:
        assert utf16_slice(answer, item["start"], item["end"]) == item["text"]
    assert read_support(support) is not None


@given(text=st.text(alphabet=st.sampled_from('0123456789.,-$%kM e+:/()"abT \n'), max_size=40))
def test_figures_never_raise_and_each_is_its_own_text(text):
    for figure in find_figures(text):
        assert text[figure.start : figure.end] == figure.text and figure.mantissa >= 0


def test_the_matcher_rescales_to_the_finest_precision_asked():
    matcher = FigureMatcher(find_figures("a: 2318.45; b: 611.9"))
    coarse, fine = find_figures("$2.9k and $2,930.35")
    assert matcher.matches(coarse) and matcher.matches(fine)
    assert not matcher.matches(find_figures("$2,930.34")[0])


# The quick path (`_found_as_written`: a cited number found where a figure's digits are written) and
# `FigureMatcher` over the whole cited text give the same answer (STYLE 13: a second path is tied to the first).
_pieces = st.sampled_from(
    [" ", "; ", ": ", ", ", "\n", "$", "-", "US$", "e", "a", "x7", "2025-01-15", "10:30", "1. ", '"', "(", ".", "%",
     " million", "k", "1,2", "-"]
)  # fmt: skip
_numbers = st.builds(
    lambda value, separators, currency: write(value, separators=separators, currency=currency),
    st.decimals(min_value=0, max_value=10**7, places=2, allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.booleans(),
)
_texts = st.lists(_numbers | _pieces, max_size=14).map("".join)


@given(cited=_texts, span=_texts)
def test_the_quick_path_agrees_with_reading_the_whole_cited_text(cited, span):
    figures = find_figures(span) + find_figures(cited)  # some copied, some not
    matcher = FigureMatcher(find_figures(cited))
    assert unmatched_figures(figures, cited) == [figure for figure in figures if not matcher.matches(figure)]
