"""Issue 12, layout: the admin in a real browser (headless Chromium through
Playwright) at 1366 and 1920 px, on the example turns. Skipped only when a
Chromium binary is missing (CI installs it). What is asserted of the compact
layout is read from our own templates' CSS, not from Django's stylesheet."""

from __future__ import annotations

import io
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
from django.core.management import call_command
from playwright import sync_api as playwright_api

from tests.factories import UserFactory

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install -y chromium)"),
    pytest.mark.django_db(transaction=True),
]
EXAMPLE_TURNS = Path(__file__).resolve().parents[2] / "examples" / "turns"
COUNT_HEADERS = ("Citations", "Typed", "Untyped", "Malformed", "Support")
CHATLOG_TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "admin" / "chat" / "chatlog"


def compact_rules(template: str) -> tuple[str, str]:
    """The media query of a template's compact layout and the CSS inside it."""
    css = (CHATLOG_TEMPLATES / template).read_text(encoding="utf-8")
    found = re.search(r"@media (\([^)]*\)) \{(.*)\}\s*</style>", css, re.DOTALL)
    assert found, template
    return found.group(1), found.group(2)


LIST_MEDIA, LIST_CSS = compact_rules("change_list.html")
FORM_MEDIA, FORM_CSS = compact_rules("change_form.html")
_FILTER_RULE = re.search(r"#changelist-filter \{[^}]*flex-basis: ([^;]+);", LIST_CSS)
assert _FILTER_RULE, "change_list.html sets the filter column's flex-basis"
#: The filter column's width in our compact list layout.
COMPACT_FILTER = _FILTER_RULE.group(1)


@pytest.fixture
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def demo_data(live_server) -> None:
    """The example turns and a staff user, written before Playwright starts its
    event loop (Django refuses ORM calls from a thread running one)."""
    call_command("import_turns", str(EXAMPLE_TURNS), create_users=True, stdout=io.StringIO())
    staff: Any = UserFactory.create(username="layout-admin", is_staff=True, is_superuser=True)
    staff.set_password("pw")
    staff.save()


@pytest.fixture
def signed_in(live_server, demo_data, browser) -> Any:
    """A function opening a signed-in staff page at a viewport width."""

    def open_page(width: int) -> Any:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(f"{live_server.url}/admin/login/?next=/admin/chat/chatlog/")
        page.fill("#id_username", "layout-admin")
        page.fill("#id_password", "pw")
        page.click("input[type=submit]")
        page.wait_for_url("**/admin/chat/chatlog/")
        return page

    return open_page


def open_first_log(page: Any, query: str) -> None:
    """Open the first log the list shows for `query` (waiting for each page to load)."""
    page.goto(page.url.split("?")[0] + query)
    page.goto(urljoin(page.url, page.locator("#result_list tbody tr th a").first.get_attribute("href")))


LIST_GEOMETRY = """() => {
  const results = document.querySelector('.results');
  const box = results.getBoundingClientRect();
  return {
    scroll: results.scrollWidth, width: results.clientWidth, right: box.right,
    page: document.documentElement.scrollWidth,
    heads: Object.fromEntries([...document.querySelectorAll('#result_list thead th')]
      .map(th => [th.textContent.trim(), th.getBoundingClientRect().right])),
    filter: getComputedStyle(document.querySelector('#changelist-filter')).flexBasis,
  };
}"""

TABLE_GEOMETRY = """() => [...document.querySelectorAll('table.citation-table')].map(t => {
  const cited = [...t.querySelectorAll('thead th')].pop().getBoundingClientRect();
  const column = t.closest('.readonly').getBoundingClientRect();
  return {scroll: t.scrollWidth, width: t.clientWidth,
          citedRight: cited.right, citedWidth: cited.width, columnRight: column.right};
})"""


def test_the_compact_rules_are_ours_and_below_1600px():
    # What the tests below rely on, read from the templates.
    assert LIST_MEDIA == FORM_MEDIA == "(max-width: 1599px)"  # docs/admin.md: below 1600 px
    assert "table-layout: fixed" in FORM_CSS


def test_at_1366_every_count_column_shows_without_horizontal_scrolling(signed_in):
    page = signed_in(1366)
    assert page.evaluate(f"matchMedia('{LIST_MEDIA}').matches") is True
    geometry = page.evaluate(LIST_GEOMETRY)
    assert geometry["filter"] == COMPACT_FILTER  # our narrower filter column applies
    assert geometry["scroll"] <= geometry["width"], geometry
    assert geometry["page"] <= 1366
    for header in COUNT_HEADERS:
        assert geometry["heads"][header] <= geometry["right"] + 1, (header, geometry)


def test_at_1366_the_cited_text_column_of_a_log_is_inside_the_page_and_readable(signed_in):
    page = signed_in(1366)
    open_first_log(page, "?target_kind=accounts")
    assert page.evaluate("getComputedStyle(document.querySelector('table.citation-table')).tableLayout") == "fixed"
    tables = page.evaluate(TABLE_GEOMETRY)
    assert len(tables) == 2  # the log's citations and its inline citations
    for table in tables:
        assert table["scroll"] <= table["width"], table
        assert table["citedRight"] <= table["columnRight"] + 1, table
        assert table["citedWidth"] >= 250, table  # about 40 characters a line


def test_at_1920_django_layout_is_left_as_it_was(signed_in):
    # The compact rules apply below 1600 px only: none of ours is in force.
    page = signed_in(1920)
    assert page.evaluate(f"matchMedia('{LIST_MEDIA}').matches") is False
    geometry = page.evaluate(LIST_GEOMETRY)
    assert geometry["filter"] != COMPACT_FILTER
    assert geometry["scroll"] <= geometry["width"]
    open_first_log(page, "?target_kind=accounts")
    layout = page.evaluate("getComputedStyle(document.querySelector('table.citation-table')).tableLayout")
    assert layout == "auto"
