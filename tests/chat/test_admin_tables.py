"""The admin's change page (issue #3): the citation tables of the demo and golden turns (kinds, accounts,
providers, UTF-16 spans), odd stored values labelled, titles and URLs escaped, and its query budget. Runs on
SQLite and on PostgreSQL (DATABASE_URL)."""

from __future__ import annotations

import html
import io
import json

import pytest
from django.core.management import call_command

from chat.admin import display as admin_display
from chat.models import ChatLog
from chat.services import record_turn
from citations.summary import classify_citation
from citations.utf16 import utf16_length, utf16_slice
from tests.cases import load_cases
from tests.chat.admin_support import ACCOUNT_A, ACCOUNT_B, LIST_URL, REPO, change_url, cite, listed, log_with
from tests.factories import ChatLogFactory, UserFactory

EXAMPLE_TURNS = REPO / "examples" / "turns"


# -- the detail page on real turns ---------------------------------------------


def _golden_cases() -> list[dict]:
    return load_cases("turns.json", shared=False)  # the tests below index them


def _demo_logs() -> list[ChatLog]:
    """The example turns (as `make run` imports them), else the turn vectors."""
    if EXAMPLE_TURNS.is_dir() and any(p.suffix in (".json", ".jsonl") for p in EXAMPLE_TURNS.iterdir()):
        call_command("import_turns", str(EXAMPLE_TURNS), create_users=True, stdout=io.StringIO())
    else:
        cases = _golden_cases()
        UserFactory.create(username="maya")
        for case in cases:
            record_turn(case["record"])
    return list(ChatLog.objects.order_by("created_at", "id"))


def _expected_fragments(log: ChatLog) -> list[str]:
    """What the page must show of a log, derived from its stored JSON."""
    fragments = [html.escape(log.response, quote=True)] if log.response else []
    for column in (log.citations, log.inline_citations):
        for entry in column:
            kind, target = admin_display.citation_state(entry)
            fragments.append(f"citation-kind-{kind}")
            fragments.append(html.escape(entry["source"]))
            for ref in (target.to_json().get("accounts") or [target.to_json()]) if target else []:
                if "accountId" in ref:
                    fragments.append(html.escape(ref["accountId"]))
    for entry in log.inline_citations:
        covered = utf16_slice(log.response, entry["start"], entry["end"])
        if covered:
            fragments.append(html.escape(covered[: admin_display.FOLD_PREVIEW], quote=True))
    return fragments


@pytest.mark.django_db
def test_staff_see_every_citation_of_the_demo_turns(staff_client):
    logs = _demo_logs()
    assert logs
    listing = staff_client.get(LIST_URL)
    assert listed(listing) == {log.pk for log in logs}
    # Each row's count columns equal classify_citation over its stored citations.
    for row in listing.context["cl"].result_list:
        log = next(log for log in logs if log.pk == row.pk)
        states = [classify_citation(entry)[0] for entry in log.citations]
        untyped, malformed = states.count("untyped"), states.count("malformed")
        assert (row.citation_total, row.typed_total, row.untyped_total, row.malformed_total) == (
            len(states),
            len(states) - untyped - malformed,
            untyped,
            malformed,
        )
    assert any(row.typed_total for row in listing.context["cl"].result_list)

    for log in logs:
        response = staff_client.get(change_url(log))
        assert response.status_code == 200
        page = response.content.decode()
        assert page.count('class="citation-table"') == (1 if log.citations else 0) + (1 if log.inline_citations else 0)
        for fragment in _expected_fragments(log):
            assert fragment in page, (log.pk, fragment)
        # The raw JSON follows, pretty-printed with Unicode as is.
        assert html.escape(json.dumps(log.citations, indent=2, ensure_ascii=False)) in page


@pytest.mark.django_db
def test_golden_turn_tables_show_kinds_accounts_providers_and_utf16_spans(staff_client):
    cases = _golden_cases()
    UserFactory.create(username="maya")
    logs = {case["why"]: record_turn(case["record"]) for case in cases}

    # Two cards under one label: one `accounts` target naming both, provider shown to staff.
    page = staff_client.get(change_url(logs[cases[0]["why"]])).content.decode()
    assert "citation-kind-accounts" in page and 'citation-kind-account"' in page
    assert f"<code>{ACCOUNT_A}</code> (plaid)" in page
    assert f"<code>{ACCOUNT_B}</code> (plaid)" in page
    assert (
        '<code>8–46</code><br>“<span style="white-space:pre-wrap">$1,560.33 across your two credit cards</span>”'
        in page
    )

    # The answer starts with an emoji (two UTF-16 units): spans are sliced in UTF-16.
    page = staff_client.get(change_url(logs[cases[1]["why"]])).content.decode()
    assert '<code>33–42</code><br>“<span style="white-space:pre-wrap">$1,250.33</span>”' in page
    assert '<code>98–105</code><br>“<span style="white-space:pre-wrap">$310.00</span>”' in page
    assert "💳" in page  # the raw JSON and the answer keep Unicode as is

    # Untyped citations are labelled, never hidden.
    page = staff_client.get(change_url(logs[cases[2]["why"]])).content.decode()
    assert page.count("citation-kind-untyped") == 4  # 2 summary + 2 inline
    assert "https://www.irs.gov/publications/p590a" in page


# -- odd stored values -----------------------------------------------------------


@pytest.mark.django_db
def test_columns_that_are_not_lists_render_labelled(staff_client):
    # The database refuses a column that is not a list (migration 0003), so
    # those labels are checked on the builders; bad entries go through the page.
    assert "stored value is null, not a list" in admin_display.citations_table(None)
    assert "stored value is an object, not a list" in admin_display.inline_citations_table({"a": 1}, "")
    assert "stored value is a string, not a list" in admin_display.citations_table("[]")
    assert "stored value is int, not a list" in admin_display.inline_citations_table(42, "")
    logs = [ChatLogFactory.create()]
    ChatLog.objects.filter(pk=logs[0].pk).update(
        citations=[5, None, {"source": "s", "title": None, "cited_text": None, "target": {"kind": "weather"}}],
        inline_citations=[
            {"source": "s", "start": "0", "end": 3},
            {"source": "s", "start": 2, "end": 999},
            {"source": "s", "start": 4, "end": 1},
            {"source": "s"},
            "x",
        ],
    )

    pages = [staff_client.get(change_url(log)) for log in logs]

    assert [p.status_code for p in pages] == [200]
    third = pages[0].content.decode()
    assert third.count("citation-kind-malformed") == 4  # 5, None, weather; "x" inline
    assert "target cannot be read" in third and "&quot;weather&quot;" in third
    assert "offsets missing or not integers" in third
    assert f"out of range (answer is {utf16_length(logs[0].response)} UTF-16 units)" in third
    assert third.count("out of range") == 2  # 2–999 and the reversed 4–1


# -- safety ----------------------------------------------------------------------


@pytest.mark.django_db
def test_script_title_is_text_and_only_http_urls_are_links(staff_client):
    log = log_with(
        [
            cite(
                "javascript:alert(1)", {"kind": "web", "url": "javascript:alert(1)"}, title="<script>alert(1)</script>"
            ),
            cite("data:text/html,x", {"kind": "tax_reference", "url": "data:text/html,<b>x</b>"}),
            cite("https://example.org/a?b=1&c=2", {"kind": "web", "url": "https://example.org/a?b=1&c=2"}),
        ]
    )

    page = staff_client.get(change_url(log)).content.decode()

    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'href="javascript:' not in page.lower()
    assert 'href="data:' not in page.lower()
    assert "<code>javascript:alert(1)</code>" in page
    assert '<a href="https://example.org/a?b=1&amp;c=2" rel="noopener noreferrer" target="_blank">' in page
    assert "<b>x</b>" not in page


@pytest.mark.django_db
def test_change_view_runs_three_queries(staff_client, django_assert_num_queries):
    log = ChatLogFactory.create()
    with django_assert_num_queries(3):
        # 1. the session row, 2. the staff user, 3. the log with its session
        #    and owner (select_related in get_queryset).
        response = staff_client.get(change_url(log))
    assert response.status_code == 200
