"""Stored answers in a real browser: Playwright driving Debian's chromium against `live_server` (docs/pages.md).
Sign in and open a chip's accounts, chips and popovers from the keyboard, a Markdown answer's chips where
they are cited, long labels, nothing in an answer runs, unsafe or malformed targets; every page's favicon,
and screenshots.

Skipped, with the reason, only when /usr/bin/chromium is absent. Screenshots of the demo sessions at 375,
1366 and 1920 px go to var/screenshots/."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from chat.models import ChatSession
from finance.models import Account
from tests.browser_fixtures import BROWSER_MARKS, SCREENSHOTS, sign_in
from tests.factories import ChatLogFactory
from tests.markdown_answers import IRS_URL, overview_answer
from tests.pages.pages_browser_support import OVERVIEW_TARGETS, SAPPHIRE

pytestmark = BROWSER_MARKS

CARD_SESSION = "d93ada3e-af5f-4e4e-823c-781fec71f26d"  # examples/turns/01-card-balances.json
IRS_TITLE = "401(k) limit increases to $24,500 for 2026, IRA limit increases to $7,500"


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
