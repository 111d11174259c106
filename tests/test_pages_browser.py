"""The pages in a real browser: Playwright driving Debian's chromium against `live_server` (docs/pages.md).

Skipped, with the reason, only when /usr/bin/chromium is absent. Screenshots
of the demo session at 375, 1366 and 1920 px go to var/screenshots/.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from playwright.sync_api import expect

from chat.models import ChatSession
from finance.demo import seed_demo_finance
from finance.models import Account
from tests import pages_live_urls
from tests.factories import ChatLogFactory, UserFactory

CHROMIUM = Path("/usr/bin/chromium")
expect.set_options(timeout=30_000)  # generous: 2 shared cores in CI, and the SDK's retry backoff
CARD_SESSION = "d93ada3e-af5f-4e4e-823c-781fec71f26d"  # examples/turns/01-card-balances.json
CARD_A = "BxBXxLj1m4HMXBm9WZZmCWVbPjX16EHwv99vp"
CARD_B = "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U"
PASSWORD = "browser-test-pw"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="no browser: /usr/bin/chromium is absent (apt-get install chromium)"
    ),
]

# The DOM of every chip in an answer, as plain data: the same for server-rendered and JS-built chips.
SIGNATURE_JS = """
(root) => {
  const chip = (c) => {
    const label = c.querySelector(':scope > .chip__label');
    const pop = c.querySelector(':scope > .chip__pop');
    const cited = pop.querySelector('.chip__cited');
    return {
      kind: c.dataset.kind, tag: label.tagName, label: label.textContent,
      href: label.getAttribute('href'), target: label.getAttribute('target'), rel: label.getAttribute('rel'),
      popover: [label, c.querySelector('.chip__quote')].some(b => b && b.getAttribute('popovertarget') === pop.id),
      title: pop.querySelector('.chip__pop-title').textContent,
      accounts: [...pop.querySelectorAll('.chip__accounts a')].map(a => [a.textContent, a.getAttribute('href')]),
      cited: cited.tagName === 'Q' ? cited.textContent : null,
    };
  };
  const answer = root.querySelector('.answer');
  const stray = root.querySelector('.stray');
  return {
    answer: [...answer.childNodes].map(n => n.nodeType === 3 ? ['text', n.textContent]
      : n.tagName === 'MARK' ? ['mark', n.textContent] : ['chip', chip(n)]),
    stray: stray && !stray.hidden ? [...stray.querySelectorAll(':scope > .chip')].map(chip) : [],
  };
}
"""


@pytest.fixture(scope="module")
def browser():
    # Playwright's sync API runs an event loop in this thread, which Django's
    # async-safety check would refuse. Set only while the browser tests run:
    # left in the environment it would reach the servers and `check --deploy`
    # that later tests start as subprocesses.
    had = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            yield chromium
            chromium.close()
    finally:
        if had is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = had


@pytest.fixture
def demo(transactional_db):
    """The demo data of `make run`: examples/turns imported, maya with a password."""
    with open(os.devnull, "w") as quiet:
        call_command("import_turns", str(settings.BASE_DIR / "examples" / "turns"), create_users=True, stdout=quiet)
    maya = UserFactory.create(username="maya")
    maya.set_password(PASSWORD)
    maya.save()
    seed_demo_finance(maya=maya, sam=UserFactory.create(username="sam"))
    return maya


@pytest.fixture
def page(browser, live_server, demo):
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)  # generous: 2 shared cores in CI
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("maya")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live_server.url}/chat/")
    yield page
    context.close()


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


def test_cited_text_opens_from_the_keyboard_and_closes_with_escape(page, live_server):
    page.goto(f"{live_server.url}/chat/{CARD_SESSION}/")
    quote = page.get_by_role("button", name="Cited text: Chase Total Checking").first
    quote.focus()
    page.keyboard.press("Enter")
    popup = page.locator(".chip__pop:popover-open")
    expect(popup).to_contain_text("4820.17")
    page.keyboard.press("Escape")
    expect(popup).to_have_count(0)


def _log_with(maya, inline, response="Pay the card first."):
    session = ChatSession.objects.create(user=maya, title="Hostile")
    return ChatLogFactory.create(session=session, response=response, citations=[], inline_citations=inline)


def test_a_javascript_url_is_not_a_link_and_a_malformed_target_falls_back(page, live_server, demo):
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


# Inputs on which the server presenter and chips.js must agree (docs/pages.md's table and its edges).
AGREEMENT_ANSWER = "💳 You owe $10. Checking has $5. Read more at the IRS."
AGREEMENT_INLINE = [
    {
        "source": "s",
        "title": "Credit card",
        "cited_text": "a",
        "start": 3,
        "end": 15,
        "target": {"kind": "accounts", "accounts": [{"accountId": CARD_A, "provider": "plaid"}, {"accountId": CARD_B}]},
    },
    {
        "source": "s",
        "title": "Checking",
        "cited_text": "b",
        "start": 16,
        "end": 32,
        "target": {"kind": "account", "accountId": "a b/ü", "provider": "plaid"},
    },
    {
        "source": "silvia://your-portfolio",
        "title": "Your portfolio",
        "cited_text": "",
        "start": 16,
        "end": 32,
        "target": {"kind": "portfolio"},
    },
    {
        "source": "silvia://market-data/finnhub",
        "title": "Live data",
        "cited_text": "c",
        "start": 33,
        "end": 37,
        "target": {"kind": "analysis"},
    },
    {
        "source": "silvia://analysis",
        "title": None,
        "cited_text": "d",
        "start": 33,
        "end": 37,
        "target": {"kind": "analysis"},
    },
    {
        "source": "x",
        "title": None,
        "cited_text": "e",
        "start": 33,
        "end": 37,
        "target": {"kind": "market_data", "ticker": "VTI"},
    },
    {
        "source": "https://www.irs.gov/a",
        "title": None,
        "cited_text": "f",
        "start": 46,
        "end": 54,
        "target": {"kind": "tax_reference", "url": "https://user@www.IRS.gov:443/a"},
    },
    {
        "source": "silvia://credit-card-corpus/x.md",
        "title": "Pricing",
        "cited_text": "g",
        "start": 46,
        "end": 54,
        "target": {"kind": "card_document", "url": None},
    },
    {
        "source": "https://ok.example/x",
        "title": "Web",
        "cited_text": "h",
        "start": 46,
        "end": 54,
        "target": {"kind": "web", "url": " javascript:alert(1)"},
    },
    {
        "source": "https://ok.example/y",
        "title": None,
        "cited_text": "i",
        "start": 0,
        "end": 2,
        "target": {"kind": "nope"},
    },
    {
        "source": "silvia://your-account/x",
        "title": "Malformed",
        "cited_text": "j",
        "start": 0,
        "end": 2,
        "target": None,
    },
    {"source": "silvia://your-account/x", "title": "Untyped", "cited_text": "k", "start": 1, "end": 2},
    {"source": "silvia://your-account/x", "title": "Reversed", "cited_text": "l", "start": 9, "end": 2},
    {"source": "silvia://your-account/x", "title": "Past end", "cited_text": "m", "start": 0, "end": 999},
    {"source": "silvia://your-account/x", "title": "Bool", "cited_text": "n", "start": True, "end": 2},
    "not an object",
]


def test_server_and_browser_build_the_same_chips(page, live_server, demo):
    log = _log_with(demo, AGREEMENT_INLINE, response=AGREEMENT_ANSWER)
    page.goto(f"{live_server.url}/chat/{log.session_id}/")
    server = page.locator("article.turn").first.evaluate(SIGNATURE_JS)
    names = json.loads(page.locator("#account-names").text_content())
    browser_built = page.evaluate(
        """([answer, inline, names, sig]) => {
            const root = document.createElement('div');
            root.innerHTML = '<div class="answer"></div><p class="stray" hidden></p>';
            document.body.append(root);
            const [answerEl, strayEl] = [root.querySelector('.answer'), root.querySelector('.stray')];
            SilviaChips.renderAnswer(answerEl, strayEl, answer, inline, names);
            return (0, eval)('(' + sig + ')')(root);
        }""",
        [AGREEMENT_ANSWER, AGREEMENT_INLINE, names, SIGNATURE_JS],
    )
    assert browser_built == server
    # Inside the 💳 pair, reversed, past the end, a bool, not an object: after the text.
    assert [chip["label"] for chip in server["stray"]] == ["Untyped", "Reversed", "Past end", "Bool", "Source"]
    assert sum(1 for kind, _ in server["answer"] if kind == "chip") == 11


@pytest.mark.urls("tests.pages_live_urls")
def test_a_live_turn_streams_in_reconnects_and_equals_the_page_after_reload(page, live_server, settings):
    settings.ANTHROPIC_CONFIGURED = True
    pages_live_urls.RECONNECTS.clear()
    page.goto(f"{live_server.url}/chat/new/")
    page.get_by_label("Your question").fill("How much do I owe on my credit cards right now?")
    page.get_by_role("button", name="Ask").click()
    live = page.locator("article.turn--live")
    live.get_by_role("button", name="2 accounts").wait_for()  # a chip appeared while streaming
    page.get_by_text("Answer saved.").wait_for()
    reconnects = pages_live_urls.RECONNECTS
    assert reconnects == [str(pages_live_urls.DROP_AFTER)]
    streamed = live.evaluate(SIGNATURE_JS)
    session_id = page.locator("#ask-form").get_attribute("data-session-id")
    assert page.url == f"{live_server.url}/chat/{session_id}/"
    page.reload()
    stored = page.locator("article.turn").last.evaluate(SIGNATURE_JS)
    assert streamed == stored
    assert [kind for kind, value in stored["answer"] if kind == "chip"] == ["chip", "chip"]


@pytest.mark.parametrize("width", [375, 1366, 1920])
def test_screenshots_and_no_sideways_scrolling(browser, live_server, demo, width):
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        context.add_cookies([])
        page = context.new_page()
        page.goto(f"{live_server.url}/login/")
        page.get_by_label("Username").fill("maya")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.goto(f"{live_server.url}/chat/{CARD_SESSION}/")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        for answer in page.locator(".answer").all():
            assert answer.evaluate("el => el.scrollWidth <= el.clientWidth")
        out = Path(settings.BASE_DIR) / "var" / "screenshots"
        out.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out / f"session-{width}-{scheme}.png"), full_page=True)
        context.close()


CARDS = "silvia://your-account/credit-card"


def test_a_real_live_turn_streams_and_equals_the_page_after_reload(page, live_server, recorded_model):
    # The real endpoint (chat.api.live_views), the real SDK against the recorded model, a recorded SQL tool.
    from tests.live_support import cite, script, step, text, tool_use

    recorded_model.load(
        [
            script(
                step(text("Let me look."), tool_use("toolu_1", "execute_sql", {"query": "cards"})),
                step(
                    text("You owe $1,500 💳 across two cards.", cite(CARDS, "account_name: Credit card; balance: 300")),
                    text(" Checking is fine."),
                ),
            )
        ]
    )
    page.goto(f"{live_server.url}/chat/new/")
    page.get_by_label("Your question").fill("How much do I owe?")
    page.get_by_role("button", name="Ask").click()
    page.get_by_text("Answer saved.").wait_for()
    live = page.locator("article.turn--live")
    streamed = live.evaluate(SIGNATURE_JS)
    page.reload()
    stored = page.locator("article.turn").last.evaluate(SIGNATURE_JS)
    assert streamed == stored
    chips = [value for kind, value in stored["answer"] if kind == "chip"]
    assert [(c["kind"], c["label"]) for c in chips] == [("accounts", "2 accounts")]
    assert "You owe $1,500 💳 across two cards." in "".join(v for k, v in stored["answer"] if k != "chip")


def test_a_failed_live_turn_says_why_and_saves_nothing(page, live_server, recorded_model):
    from chat.models import ChatLog
    from tests.live_support import script, step, text

    recorded_model.load([script(step(text("Half an answer that will never end."), error_after=5))])
    before = ChatLog.objects.count()
    page.goto(f"{live_server.url}/chat/new/")
    page.get_by_label("Your question").fill("How much do I owe?")
    page.get_by_role("button", name="Ask").click()
    status = page.locator("#ask-status")
    expect(status).to_have_text("The assistant is overloaded right now. Please try again in a moment.")
    expect(status).to_have_class("ask__status ask__status--error")
    assert ChatLog.objects.count() == before
    # The form is usable again for another try.
    expect(page.get_by_role("button", name="Ask")).to_be_enabled()
