"""The pages in a real browser: Playwright driving Debian's chromium against `live_server` (docs/pages.md).

Skipped, with the reason, only when /usr/bin/chromium is absent. Screenshots
of the demo sessions at 375, 1366 and 1920 px go to var/screenshots/.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from chat.models import ChatLog, ChatSession
from devtools.recorded_model import load_scripts
from finance.models import Account
from tests import pages_live_urls
from tests.browser_fixtures import BROWSER_MARKS, SCREENSHOTS, sign_in
from tests.factories import ChatLogFactory
from tests.markdown_answers import CARDS_SOURCE, DEADLINES_SOURCE, IRS_URL, OVERVIEW_SCRIPT, overview_answer

pytestmark = BROWSER_MARKS

CARD_SESSION = "d93ada3e-af5f-4e4e-823c-781fec71f26d"  # examples/turns/01-card-balances.json
# maya's two cards in finance/demo_data.py, both labelled "Credit card" in account_name.
SAPPHIRE = "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK"
DOUBLE_CASH = "LzdocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFRIB"
OVERVIEW_TARGETS: dict[str, dict[str, object]] = {
    CARDS_SOURCE: {
        "kind": "accounts",
        "accounts": [{"accountId": SAPPHIRE, "provider": "plaid"}, {"accountId": DOUBLE_CASH, "provider": "plaid"}],
    },
    IRS_URL: {"kind": "tax_reference", "url": IRS_URL},
    DEADLINES_SOURCE: {"kind": "tax_reference", "url": None},
}
IRS_TITLE = "401(k) limit increases to $24,500 for 2026, IRA limit increases to $7,500"

# The answer's DOM of a turn, without the class that marks the turn streamed in this page view.
TURN_HTML_JS = "el => { const c = el.cloneNode(true); c.classList.remove('turn--live'); return c.outerHTML; }"


def _log_with(maya, inline, response="Pay the card first.", title="Hostile", question="What should I pay first?"):
    session = ChatSession.objects.create(user=maya, title=title)
    return ChatLogFactory.create(
        session=session, user_message=question, response=response, citations=[], inline_citations=inline
    )


def _overview_log(maya):
    answer, inline = overview_answer(OVERVIEW_TARGETS)
    question = "Give me an overview of my cards and my IRA"
    return _log_with(maya, inline, response=answer, title="Cards and IRA overview", question=question)


def test_sign_in_and_open_each_account_of_the_two_cards_chip(page, live_server):
    # The two cards the first turn cites, as imported from examples/turns.
    first = ChatSession.objects.get(pk=CARD_SESSION).logs.order_by("created_at").first()
    assert first is not None
    card_ids = [ref["accountId"] for ref in first.inline_citations[0]["target"]["accounts"]]
    assert len(card_ids) == 2
    page.get_by_role("link", name="Card balances").click()
    page.wait_for_url(f"{live_server.url}/chat/{CARD_SESSION}/")
    for index, account_id in enumerate(card_ids):
        first_turn = page.locator("article.turn").first
        first_turn.get_by_role("button", name="2 accounts").click()
        links = page.locator(".chip__pop:popover-open").get_by_role("listitem").get_by_role("link")
        expect(links).to_have_count(2)
        name = Account.objects.get(user__username="maya", source_account_id=account_id).label
        assert links.nth(index).inner_text() == name
        links.nth(index).click()
        page.wait_for_url(f"{live_server.url}/accounts/{account_id}")
        assert page.get_by_role("heading", level=1).inner_text() == name
        page.go_back()


def test_chips_and_popovers_work_from_the_keyboard(page, live_server):
    page.goto(f"{live_server.url}/chat/{CARD_SESSION}/")
    quote = page.get_by_role("button", name="Show the cited text: Chase Total Checking").first
    quote.focus()
    # What the button does shows on focus, as on hover.
    tip = page.locator(".chip__quote:focus + .chip__tip")
    expect(tip).to_be_visible()
    assert tip.inner_text() == "Show the cited text"
    page.keyboard.press("Enter")
    popup = page.locator(".chip__pop:popover-open")
    expect(popup).to_contain_text("4820.17")
    assert popup.get_attribute("role") == "dialog"
    assert popup.get_attribute("aria-label") == "Chase Total Checking"
    page.keyboard.press("Tab")  # into the dialog: its Close button is next
    assert page.evaluate("document.activeElement.textContent") == "Close"
    page.keyboard.press("Escape")
    expect(popup).to_have_count(0)
    # The "N accounts" chip is a button that opens its list the same way.
    accounts = page.get_by_role("button", name="2 accounts").first
    accounts.focus()
    page.keyboard.press("Space")
    expect(page.locator(".chip__pop:popover-open").get_by_role("link")).to_have_count(2)
    page.keyboard.press("Escape")
    expect(page.locator(".chip__pop:popover-open")).to_have_count(0)


def test_a_markdown_answer_keeps_each_chip_where_it_is_cited(page, live_server, demo):
    log = _overview_log(demo)
    page.goto(f"{live_server.url}/chat/{log.session_id}/")
    answer = page.locator(".answer")
    # Each citation: the highlighted text in its element, the chip right after it.
    placed = answer.evaluate(
        """el => [...el.querySelectorAll('.chip')].map(chip => {
            const before = chip.previousElementSibling;
            const mark = before.tagName === 'MARK' ? before : before.querySelector('mark');
            const path = [];
            for (let n = chip.parentElement; n !== el; n = n.parentElement) path.unshift(n.tagName.toLowerCase());
            return {label: chip.querySelector('.chip__label').textContent, path, before: before.tagName,
                    mark: mark.textContent, markPath: mark.parentElement.tagName.toLowerCase()};
        })"""
    )
    assert placed == [
        {
            "label": "2 accounts",
            "path": ["ul", "li", "ul", "li", "strong"],  # bold text in a nested list item
            "before": "MARK",
            "mark": "Both credit cards carry a balance",
            "markPath": "strong",
        },
        {
            "label": IRS_TITLE,
            "path": ["ul", "li"],
            "before": "MARK",
            "mark": "the IRA limit is $7,500 for 2026",
            "markPath": "li",
        },
        {
            "label": "2 accounts",
            "path": ["div", "table", "tbody", "tr", "td"],
            "before": "MARK",
            "mark": "two cards under one label",
            "markPath": "td",
        },
        {
            "label": "IRA deadlines",  # a library document known by its file name, ira-deadlines.md
            "path": ["div", "table", "tbody", "tr", "td"],
            "before": "MARK",
            "mark": "contribute by April 15, 2027",
            "markPath": "td",
        },
        {"label": IRS_TITLE, "path": ["p"], "before": "A", "mark": "the IRS announcement", "markPath": "a"},
    ]
    # The highlighted text is the cited span of the raw answer, each time.
    assert [p["mark"] for p in placed] == [log.response[c["start"] : c["end"]] for c in log.inline_citations]
    assert answer.locator("h4").inner_text() == "Cards"
    assert answer.locator("li > code").inner_text() == "purchase_apr"
    assert answer.locator("pre code").inner_text() == "SELECT account_name, current_balance\nFROM account_details;\n"
    link = answer.get_by_role("link", name="the IRS announcement")
    assert link.get_attribute("href") == IRS_URL
    assert link.get_attribute("rel") == "noopener noreferrer nofollow"
    # The chip inside the table cell still opens its accounts.
    answer.locator("td").get_by_role("button", name="2 accounts").click()
    expect(page.locator(".chip__pop:popover-open").get_by_role("link")).to_have_count(2)


def test_a_long_label_shows_whole_on_hover_and_focus_and_keeps_it_as_its_name(browser, live_server, demo):
    log = _overview_log(demo)
    context = browser.new_context(viewport={"width": 375, "height": 800})
    page = context.new_page()
    sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/chat/{log.session_id}/")
    label = page.get_by_role("link", name=IRS_TITLE, exact=True).first  # the whole title is its accessible name
    assert label.evaluate("el => el.scrollWidth > el.clientWidth")  # cut short at this width
    tip = page.locator(".chip__label:is(:hover, :focus) + .chip__tip")
    expect(tip).to_have_count(0)
    label.hover()
    expect(tip).to_be_visible()
    assert tip.inner_text() == IRS_TITLE
    page.mouse.move(0, 0)
    expect(tip).to_have_count(0)
    label.focus()
    expect(page.locator(".chip__label:focus-visible + .chip__tip")).to_be_visible()
    # A label with no link is focusable when it may be cut, so the keyboard can read it too.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "chip__quote"
    context.close()


def test_nothing_in_an_answer_runs(page, live_server, demo):
    hostile = (
        "Look: <img src=x onerror=\"document.title='pwned'\"> <script>document.title='pwned'</script> "
        "[click](javascript:document.title='pwned') [2](JAVASCRIPT:alert(1)) ![i](javascript:alert(1)) "
        '<a href="javascript:alert(1)">a</a> <svg onload=alert(1)>'
    )
    dialogs: list[str] = []

    def on_dialog(dialog):
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    log = _log_with(demo, [{"source": "s", "title": "T", "cited_text": "x", "start": 0, "end": 4}], response=hostile)
    page.goto(f"{live_server.url}/chat/{log.session_id}/")
    answer = page.locator(".answer")
    expect(answer).to_contain_text("<script>document.title='pwned'</script>")  # shown as text
    expect(answer).to_contain_text("[click](javascript:document.title='pwned')")
    assert answer.locator("img, script, svg").count() == 0
    assert page.locator("a[href^='javascript' i]").count() == 0
    answer.get_by_text("[click]").click()
    # The same answer rendered while streaming (what ask.js puts in the page).
    page.evaluate(
        """async (answer) => {
            const csrf = document.querySelector('input[name=csrfmiddlewaretoken]').value;
            const response = await fetch('/chat/answer-preview/', {method: 'POST',
                headers: {'Content-Type': 'application/json', 'X-CSRFToken': csrf},
                body: JSON.stringify({answer, inline_citations: []})});
            const box = document.createElement('div');
            box.innerHTML = await response.text();
            document.body.append(box);
            await new Promise(r => setTimeout(r, 300));
        }""",
        hostile,
    )
    assert page.title() != "pwned" and dialogs == []
    assert page.locator("img, script:not([src]), svg").count() == 0


def test_a_javascript_url_chip_is_not_a_link_and_a_malformed_target_falls_back(page, live_server, demo):
    log = _log_with(
        demo,
        [
            {
                "source": "javascript:alert(1)",
                "title": "Evil",
                "cited_text": "x",
                "start": 0,
                "end": 3,
                "target": {"kind": "web", "url": "javascript:alert(1)"},
            },
            {
                "source": "silvia://your-account/checking",
                "title": "Checking",
                "cited_text": "y",
                "start": 4,
                "end": 8,
                "target": {"kind": "account"},
            },
        ],
    )
    page.goto(f"{live_server.url}/chat/{log.session_id}/")
    evil = page.locator(".chip", has_text="Evil")
    assert evil.locator("a").count() == 0
    assert page.locator("a[href^='javascript' i]").count() == 0
    fallback = page.locator(".chip[data-kind=fallback]")
    assert fallback.count() == 1 and fallback.locator(".chip__label").inner_text() == "Checking"


def _preview_bodies(page):
    """The bodies the page posts to /chat/answer-preview/ while a turn streams, and its responses."""
    posted, answered = [], []
    page.on("request", lambda r: posted.append(r.post_data_json) if r.url.endswith("/chat/answer-preview/") else None)
    page.on("response", lambda r: answered.append(r) if r.url.endswith("/chat/answer-preview/") else None)
    return posted, answered


@pytest.mark.urls("tests.pages_live_urls")
def test_a_dropped_stream_resumes_after_its_last_event_and_stops_after_done(page, live_server, settings):
    settings.ANTHROPIC_CONFIGURED = True
    pages_live_urls.reset("resume")
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
    time.sleep(1)  # the stream sent `retry: 200`: a page that reconnected after `done` would have by now
    assert list(pages_live_urls.RECONNECTS) == [str(pages_live_urls.DROP_AFTER)]
    page.reload()
    assert page.locator("article.turn").last.evaluate(TURN_HTML_JS) == streamed


@pytest.mark.urls("tests.pages_live_urls")
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


@pytest.mark.urls("tests.pages_live_urls")
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
    page.goto(f"{live_server.url}/chat/new/")
    page.get_by_label("Your question").fill("How much do I owe?")
    page.get_by_role("button", name="Ask").click()
    status = page.locator("#ask-status")
    expect(status).to_have_text(message)
    expect(status).to_have_class("ask__status ask__status--error")
    time.sleep(1)  # `retry: 200`: an EventSource left open would have reconnected by now
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


def test_every_page_asks_for_nothing_missing_and_has_a_favicon(page, live_server, demo):
    missing = []
    page.on("response", lambda r: missing.append(r.url) if r.status >= 400 else None)
    log = _overview_log(demo)
    for path in ("/chat/", f"/chat/{log.session_id}/", "/chat/new/", f"/accounts/{SAPPHIRE}", "/portfolio/"):
        page.goto(f"{live_server.url}{path}")
        expect(page.locator("link[rel=icon]")).to_have_count(2)
    icon = page.evaluate("fetch('/favicon.ico').then(r => [r.status, r.headers.get('content-type'), r.redirected])")
    assert icon == [200, "image/vnd.microsoft.icon", True]
    assert missing == []


@pytest.mark.parametrize("width", [375, 1366, 1920])
def test_screenshots_and_no_sideways_scrolling(browser, live_server, demo, width):
    log = _overview_log(demo)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        page = context.new_page()
        sign_in(page, live_server.url)
        for name, session in (("session", CARD_SESSION), ("markdown", log.session_id)):
            page.goto(f"{live_server.url}/chat/{session}/")
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            for answer in page.locator(".answer").all():
                assert answer.evaluate("el => el.scrollWidth <= el.clientWidth")
            page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}-{scheme}.png"), full_page=True)
        context.close()
