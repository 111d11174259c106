"""The supervisor's view of support in the admin (SPEC 15, docs/admin.md): the support filter and the counts per
status in the log list, and on a log's page each inline citation's status, its span with the figures not found
marked and its cited text beside it, escaped. Runs on SQLite and on PostgreSQL (DATABASE_URL)."""

from __future__ import annotations

import re

import pytest

from chat.admin import display as admin_display
from chat.services import record_turn
from tests.chat.admin_support import LIST_URL, change_url, listed
from tests.factories import ChatLogFactory
from tests.support_turns import CASES

pytestmark = pytest.mark.django_db


@pytest.fixture
def support_logs(maya):
    """The four support cases stored (hand-computed statuses: sums, quote not found, million, no tool outputs)
    and an old row without support."""
    logs = [record_turn(case["record"]) for case in CASES]
    old = ChatLogFactory.create()  # saved before support existed: its citation has none
    return logs, old


def test_the_support_filter_keeps_the_logs_with_a_citation_of_that_status(staff_client, support_logs):
    (sums, document, million, no_tools), old = support_logs
    # From support_turns.json: 1 has a partly supported total; 2 an unsupported fee and an unchecked web
    # citation; 3 a partly supported million; 4 only an unchecked one; the old row's has no support.
    expected = {
        "flagged": {sums.pk, document.pk, million.pk},
        "partly_supported": {sums.pk, million.pk},
        "unsupported": {document.pk},
        "supported": {sums.pk, document.pk, million.pk},
        "unchecked": {document.pk, no_tools.pk, old.pk},
    }
    for choice, logs in expected.items():
        assert listed(staff_client.get(LIST_URL, {"support": choice})) == logs, choice
    assert listed(staff_client.get(LIST_URL, {"support": "nonsense"})) == set()


def test_the_list_counts_each_status_of_a_logs_inline_citations(staff_client, support_logs):
    (sums, document, _, _), old = support_logs
    response = staff_client.get(LIST_URL)
    rows = {log.pk: log.support_counts for log in response.context["cl"].result_list}
    assert rows[sums.pk] == {"supported": 4, "partly_supported": 1, "unsupported": 0, "unchecked": 0}
    assert rows[document.pk] == {"supported": 2, "partly_supported": 0, "unsupported": 1, "unchecked": 1}
    assert rows[old.pk] == {"supported": 0, "partly_supported": 0, "unsupported": 0, "unchecked": 1}
    html = response.content.decode()
    assert "<div>2 supported</div><div>1 unsupported</div><div>1 unchecked</div>" in html


def test_a_logs_page_marks_each_figure_not_found_in_its_span_beside_the_cited_text(staff_client, support_logs):
    (sums, document, _, _), _ = support_logs
    html = staff_client.get(change_url(sums)).content.decode()
    # "$3,000 of debt" (182-196): $3,000 is no sum or difference of 2318.45 and 611.9.
    assert '“<span style="white-space:pre-wrap"><mark class="citation-unmatched">$3,000</mark> of debt</span>”' in html
    assert "not found in the source: <mark>$3,000</mark>" in html
    assert html.count('class="citation-support citation-support-supported"') == 4
    assert "5 supported" not in html and "4 supported, 1 partly supported, 0 unsupported, 0 unchecked" in html
    document_html = staff_client.get(change_url(document)).content.decode()
    assert '<mark class="citation-unmatched">$550</mark>' in document_html
    assert "Annual fee: $550" in document_html  # the cited text, in the same row
    assert re.search(r'citation-support-unsupported" style="[^"]*">unsupported</span>', document_html)


def test_a_figure_text_is_escaped_and_a_figure_outside_its_span_is_labelled():
    support = {"status": "partly_supported", "unmatched": [{"text": "<b>", "start": 0, "end": 3}], "digest": None}
    entry = {"source": "s", "cited_text": "<i>", "start": 0, "end": 5, "support": support}
    html = admin_display.inline_citations_table([entry], "<b>ok")
    assert '<mark class="citation-unmatched">&lt;b&gt;</mark>ok' in html and "<b>" not in html
    stray = {**support, "unmatched": [{"text": "9", "start": 7, "end": 8}]}
    html = admin_display.inline_citations_table([{**entry, "support": stray}], "<b>ok and 9")
    assert "a figure not found lies outside the span" in html and "<mark class" not in html


@pytest.mark.parametrize(
    ("entry", "note"),
    [({"source": "s"}, "no support"), ({"source": "s", "support": {"status": "fine"}}, "cannot be read")],
)
def test_a_missing_or_unreadable_support_shows_as_unchecked_and_says_why(entry, note):
    html = admin_display.support_cell(entry)
    assert re.search(r'citation-support-unchecked" style="[^"]*">unchecked</span>', html) and note in html
