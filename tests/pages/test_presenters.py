"""A chip's support flag (SPEC 15, docs/pages.md#chips, docs/support.md): `pages.presenters` and the chip template.
No database."""

from __future__ import annotations

import re

import pytest
from django.template.loader import render_to_string

from pages.presenters import ChipSupport, chip_for_citation

ROWS = "account_name: Credit card; current_balance: 2318.45"
DIGEST = "sha256:" + "ab" * 32


def cite(support=None, **extra):
    entry = {
        "source": "silvia://your-account/credit-card",
        "title": "Credit card",
        "cited_text": ROWS,
        "target": {"kind": "portfolio"},
        **extra,
    }
    if support is not None:
        entry["support"] = support
    return entry


def support(status, *figures):
    unmatched = [{"text": text, "start": 0, "end": len(text)} for text in figures]
    return {"status": status, "unmatched": unmatched, "digest": None if status == "unchecked" else DIGEST}


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        (support("partly_supported", "$3,000"), ChipSupport("partly_supported", ("$3,000",))),
        (support("unsupported", "$550", "5%"), ChipSupport("unsupported", ("$550", "5%"))),
        (support("unsupported"), ChipSupport("unsupported", ())),
        (support("supported"), None),
        (support("unchecked"), None),
        (None, None),  # saved before support existed: no flag
        ({"status": "partly_supported"}, None),  # malformed: read as unchecked
        ("unsupported", None),
    ],
)
def test_only_a_partly_supported_or_unsupported_citation_flags_its_chip(stored, expected):
    assert chip_for_citation(cite(stored), account_names={}).support == expected


def test_the_words_a_flag_says():
    partly, unsupported = ChipSupport("partly_supported", ("$3,000",)), ChipSupport("unsupported", ())
    assert partly.note == "not every figure was found in the source"
    assert partly.finding == "Not every figure here was found in the source."
    assert unsupported.note == "the cited text was not found in the source"
    assert unsupported.finding == "The cited text was not found in the source."


def _render(citation):
    chip = chip_for_citation(citation, account_names={})
    return re.sub(r">\s+<", "><", render_to_string("pages/_chip.html", {"chip": chip, "dom_id": "t-1"}))


def test_a_flagged_chip_says_so_in_its_mark_its_names_and_its_dialog():
    html = _render(cite(support("partly_supported", "$3,000", "<b>")))
    assert 'class="chip chip--portfolio chip--flagged" data-kind="portfolio" data-support="partly_supported"' in html
    assert '<span class="chip__flag" aria-hidden="true">!</span>' in html
    note = "not every figure was found in the source"
    assert f'Your portfolio<span class="visually-hidden"> ({note})</span></a>' in html  # the link's name
    assert f'aria-label="Show the cited text: Your portfolio ({note})"' in html  # the quote button's name
    assert f'role="dialog" aria-label="Your portfolio ({note})"' in html
    assert (
        '<span class="chip__support"><strong>Not every figure here was found in the source.</strong> Not found in the'
        ' source: <mark class="chip__figure">$3,000</mark>, <mark class="chip__figure">&lt;b&gt;</mark>.</span>'
    ) in html


def test_a_chip_of_a_supported_citation_looks_as_before():
    flagged, plain = _render(cite(support("supported"))), _render(cite())
    assert flagged == plain and "chip__flag" not in plain and "visually-hidden" not in plain
