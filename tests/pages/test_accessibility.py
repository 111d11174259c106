"""axe-core on every page, at 375 and 1366 px, light and dark: no serious or critical violation (docs/pages.md).

axe-core comes from npm (package.json, test-only) and is injected by the
test; the pages never serve it.
"""

from __future__ import annotations

import pytest

from chat.models import ChatSession
from tests.browser_fixtures import BROWSER_MARKS, axe_violations, sign_in
from tests.factories import ChatLogFactory
from tests.markdown_answers import CARDS_SOURCE, DEADLINES_SOURCE, IRS_URL, overview_answer

pytestmark = BROWSER_MARKS

CARD_SESSION = "d93ada3e-af5f-4e4e-823c-781fec71f26d"  # examples/turns/01-card-balances.json
SAPPHIRE = "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK"  # finance/demo_data.py


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [375, 1366])
def test_no_serious_or_critical_violation_on_any_page(browser, live_server, demo, settings, width, scheme):
    settings.ANTHROPIC_CONFIGURED = True  # the session pages with their question box
    answer, inline = overview_answer(
        {
            CARDS_SOURCE: {"kind": "accounts", "accounts": [{"accountId": SAPPHIRE}, {"accountId": "x" * 20}]},
            IRS_URL: {"kind": "tax_reference", "url": IRS_URL},
            DEADLINES_SOURCE: {"kind": "tax_reference", "url": None},
        }
    )
    session = ChatSession.objects.create(user=demo, title="Overview")
    ChatLogFactory.create(session=session, response=answer, citations=[], inline_citations=inline)
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    found = {}
    page.goto(f"{live_server.url}/login/")
    found["/login/"] = axe_violations(page)
    sign_in(page, live_server.url)
    for path in (
        "/chat/",
        f"/chat/{CARD_SESSION}/",
        f"/chat/{session.id}/",
        "/chat/new/",
        f"/chat/{CARD_SESSION}/delete/",
        f"/accounts/{SAPPHIRE}",
        "/portfolio/",
    ):
        page.goto(f"{live_server.url}{path}")
        found[path] = axe_violations(page)
    # A chip's dialog open, and a cut label's tooltip showing.
    page.goto(f"{live_server.url}/chat/{session.id}/")
    page.locator("td").get_by_role("button", name="2 accounts").click()
    found["an accounts dialog"] = axe_violations(page)
    page.keyboard.press("Escape")
    page.locator(".chip__label[tabindex], a.chip__label").last.focus()
    found["a tooltip"] = axe_violations(page)
    context.close()
    assert {path: v for path, v in found.items() if v} == {}


def test_the_check_sees_a_violation_when_there_is_one(browser):
    page = browser.new_page()
    page.set_content('<html lang="en"><title>x</title><main><button></button><p style="color:#eee">faint</p></main>')
    assert {v["id"] for v in axe_violations(page)} == {"button-name", "color-contrast"}
    page.close()
