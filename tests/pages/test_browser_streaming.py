"""Live turns streaming into a real browser: Playwright driving Debian's chromium against `live_server`
(docs/pages.md). A recorded SSE body (tests/pages/pages_live_urls.py) dropped, rewound, ended by an error or a 204;
the recorded Markdown overview and a real rewind through the real endpoint (the real SDK against the
recorded model), each ending equal to the stored row; a failed turn saying why.

Skipped, with the reason, only when /usr/bin/chromium is absent."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from chat.models import ChatLog
from devtools.recorded_model import load_scripts
from tests.browser_fixtures import BROWSER_MARKS
from tests.markdown_answers import CARDS_SOURCE, OVERVIEW_SCRIPT, overview_answer
from tests.pages import pages_live_urls
from tests.pages.pages_browser_support import EVERY_EVENT_SOURCE_CLOSED_JS, OVERVIEW_TARGETS, keep_event_sources

pytestmark = BROWSER_MARKS


# The answer's DOM of a turn, without the class that marks the turn streamed in this page view.
TURN_HTML_JS = "el => { const c = el.cloneNode(true); c.classList.remove('turn--live'); return c.outerHTML; }"


def _preview_bodies(page):
    """The bodies the page posts to /chat/answer-preview/ while a turn streams, and its responses."""
    posted, answered = [], []
    page.on("request", lambda r: posted.append(r.post_data_json) if r.url.endswith("/chat/answer-preview/") else None)
    page.on("response", lambda r: answered.append(r) if r.url.endswith("/chat/answer-preview/") else None)
    return posted, answered


@pytest.mark.urls("tests.pages.pages_live_urls")
def test_a_dropped_stream_resumes_after_its_last_event_and_stops_after_done(page, live_server, settings):
    settings.ANTHROPIC_CONFIGURED = True
    pages_live_urls.reset("resume")
    keep_event_sources(page)
    page.goto(f"{live_server.url}/chat/new/")
    page.get_by_label("Your question").fill("How much do I owe on my credit cards right now?")
    page.get_by_role("button", name="Ask").click()
    live = page.locator("article.turn--live")
    live.get_by_role("button", name="2 accounts").wait_for()  # a chip appeared while streaming
    page.get_by_text("Answer saved.").wait_for()
    assert list(pages_live_urls.RECONNECTS) == [str(pages_live_urls.DROP_AFTER)]
    session_id = page.locator("#ask-form").get_attribute("data-session-id")
    assert page.url == f"{live_server.url}/chat/{session_id}/"
    streamed = live.evaluate(TURN_HTML_JS)
    assert live.locator("time").count() == 1  # a streamed answer shows its time
    # The page's flow has ended ("Answer saved."): every EventSource it made is closed, so none reconnects.
    assert page.evaluate("window.eventSources.length") == 1
    assert page.evaluate(EVERY_EVENT_SOURCE_CLOSED_JS)
    assert list(pages_live_urls.RECONNECTS) == [str(pages_live_urls.DROP_AFTER)]
    page.reload()
    assert page.locator("article.turn").last.evaluate(TURN_HTML_JS) == streamed


@pytest.mark.urls("tests.pages.pages_live_urls")
def test_a_rewind_drops_what_came_after_its_event_and_ends_equal_to_the_stored_row(page, live_server, settings):
    settings.ANTHROPIC_CONFIGURED = True
    pages_live_urls.reset("rewind", gated=True)
    posted, _ = _preview_bodies(page)
    page.goto(f"{live_server.url}/chat/new/")
    page.get_by_label("Your question").fill("Do I owe anything?")
    page.get_by_role("button", name="Ask").click()
    live = page.locator("article.turn--live")
    expect(live).to_contain_text(pages_live_urls.WRONG)  # the first attempt streamed in
    log = ChatLog.objects.get(user_message="Do I owe anything?")
    stored = {"answer": log.response, "inline_citations": log.inline_citations}
    # Before `done`: what the page holds, after applying the rewind, is the stored row.
    deadline = time.monotonic() + 30
    while stored not in posted and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    assert stored in posted
    assert all(pages_live_urls.WRONG not in body["answer"] for body in posted[posted.index(stored) :])
    expect(live).not_to_contain_text(pages_live_urls.WRONG)
    expect(live.locator(".chip")).to_have_count(2)
    assert list(pages_live_urls.RECONNECTS) == [str(pages_live_urls.DROP_AFTER)]
    pages_live_urls.GATE.set()
    page.get_by_text("Answer saved.").wait_for()
    streamed = page.locator("article.turn--live").evaluate(TURN_HTML_JS)
    page.reload()
    assert page.locator("article.turn").last.evaluate(TURN_HTML_JS) == streamed


@pytest.mark.urls("tests.pages.pages_live_urls")
@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ("error", pages_live_urls.OVERLOADED),
        ("gone", "The connection was lost. Reload the page to see the answer once it is saved."),
    ],
    ids=["the turn's error event", "204 after the end"],
)
def test_an_error_event_or_a_204_stops_the_page_reconnecting(page, live_server, settings, scenario, message):
    settings.ANTHROPIC_CONFIGURED = True
    pages_live_urls.reset(scenario)
    keep_event_sources(page)
    page.goto(f"{live_server.url}/chat/new/")
    page.get_by_label("Your question").fill("How much do I owe?")
    page.get_by_role("button", name="Ask").click()
    status = page.locator("#ask-status")
    expect(status).to_have_text(message)
    expect(status).to_have_class("ask__status ask__status--error")
    # The page said so, and every EventSource it made is closed: none can reconnect (`retry: 200` aside).
    assert page.evaluate("window.eventSources.length") == 1
    assert page.evaluate(EVERY_EVENT_SOURCE_CLOSED_JS)
    assert list(pages_live_urls.RECONNECTS) == [str(pages_live_urls.DROP_AFTER)]
    expect(page.get_by_role("button", name="Ask")).to_be_enabled()


def test_the_recorded_markdown_answer_streams_without_flashing_and_equals_the_reload(
    page, live_server, recorded_model, settings
):
    # The real endpoint, the real SDK against the recorded model, the real execute_sql and library readers.
    settings.LIVE_TOOL_FACTORIES = []
    recorded_model.load(load_scripts(OVERVIEW_SCRIPT.parent))
    posted, answered = _preview_bodies(page)
    page.goto(f"{live_server.url}/chat/new/")
    page.get_by_label("Your question").fill("Give me an overview of my cards and my IRA")
    page.get_by_role("button", name="Ask").click()
    page.get_by_text("Answer saved.").wait_for()
    live = page.locator("article.turn--live")
    streamed = live.evaluate(TURN_HTML_JS)
    answered = [response.text() for response in answered]
    # The untitled page took the session's title (the question, as stored), as a reload shows it.
    assert page.locator("h1").inner_text() == "Give me an overview of my cards and my IRA"
    assert page.title() == "Give me an overview of my cards and my IRA · Silvia"
    page.reload()
    assert page.locator("h1").inner_text() == "Give me an overview of my cards and my IRA"
    assert page.locator("article.turn").last.evaluate(TURN_HTML_JS) == streamed

    log = ChatLog.objects.get(user_message="Give me an overview of my cards and my IRA")
    _, inline = overview_answer(OVERVIEW_TARGETS)
    assert [(c["source"], c.get("target")) for c in log.inline_citations] == [
        (c["source"], c["target"]) for c in inline
    ]
    # It streamed: many renders, each of a longer answer, none showing unfinished Markdown.
    assert len(answered) >= 5
    lengths = [len(body["answer"]) for body in posted]
    assert lengths == sorted(lengths) and lengths[-1] <= len(log.response)
    for html in answered:
        for unfinished in ("**", "`", "| ---", "](http", "```"):
            assert unfinished not in html.replace("<code>", "").replace("</code>", ""), (unfinished, html)
    assert any('class="chip chip--accounts"' in html for html in answered)  # chips in place while streaming


def test_a_real_rewind_drops_a_cut_step_and_ends_as_the_stored_row(page, live_server, recorded_model, settings):
    # The real endpoint's own rewind (docs/live.md#rewind): a tool call cut off at max_tokens is
    # asked again, and what its step streamed (text and a citation) is rewound first.
    from tests.live_support import cite, script, step, text, tool_use, tool_use_raw

    settings.ANTHROPIC_MAX_TOKENS = 1000
    cut = step(
        text("Let me check your cards, "),
        text("all three of them.", cite(CARDS_SOURCE, "x", "Credit card")),
        tool_use_raw("toolu_1", "execute_sql", '{"query": "ca'),
        stop="max_tokens",
    )
    whole = step(text("Checking your cards."), tool_use("toolu_1", "execute_sql", {"query": "cards"}))
    answer = step(
        text("You owe **$1,500** on "),
        text("two cards", cite(CARDS_SOURCE, "account_name: Credit card; balance: 1200", "Credit card")),
        text("."),
    )
    recorded_model.load([script({"attempts": [cut, whole]}, answer, delay_ms=40)])
    posted, _ = _preview_bodies(page)
    page.goto(f"{live_server.url}/chat/new/")
    page.get_by_label("Your question").fill("How much do I owe across my cards?")
    page.get_by_role("button", name="Ask").click()
    page.get_by_text("Answer saved.").wait_for()
    streamed = page.locator("article.turn--live").evaluate(TURN_HTML_JS)
    page.reload()
    assert page.locator("article.turn").last.evaluate(TURN_HTML_JS) == streamed

    log = ChatLog.objects.get(user_message="How much do I owe across my cards?")
    assert log.response == "Checking your cards.\n\nYou owe **$1,500** on two cards."
    cut_shown = [i for i, body in enumerate(posted) if "all three of them." in body["answer"]]
    assert cut_shown, "the cut step streamed into the page first"
    assert any(c["cited_text"] == "x" for c in posted[cut_shown[-1]]["inline_citations"])
    after = posted[cut_shown[-1] + 1 :]
    assert after  # rendered again after the rewind
    for body in after:  # from the rewind on, the page holds a beginning of the stored row
        assert log.response.startswith(body["answer"])
        assert body["inline_citations"] == log.inline_citations[: len(body["inline_citations"])]


def test_a_failed_live_turn_says_why_saves_nothing_and_does_not_reconnect(page, live_server, recorded_model):
    from tests.live_support import script, step, text

    recorded_model.load([script(step(text("Half an answer that will never end."), error_after=5))])
    reconnects = []
    page.on("request", lambda r: reconnects.append(r.url) if "/api/chat/turns/" in r.url else None)
    before = ChatLog.objects.count()
    page.goto(f"{live_server.url}/chat/new/")
    page.get_by_label("Your question").fill("How much do I owe?")
    page.get_by_role("button", name="Ask").click()
    status = page.locator("#ask-status")
    expect(status).to_have_text("The assistant is overloaded right now. Please try again in a moment.")
    expect(status).to_have_class("ask__status ask__status--error")
    assert ChatLog.objects.count() == before
    expect(page.get_by_role("button", name="Ask")).to_be_enabled()  # usable again for another try
    assert reconnects == []
