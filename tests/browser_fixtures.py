"""Fixtures for the pages' browser tests: Playwright driving Debian's chromium (docs/pages.md#tests).

tests/conftest.py loads this module as a plugin, so `browser`, `demo` and
`page` are fixtures everywhere; a module marks its tests with `BROWSER_MARKS`
(skipped, with the reason, only when /usr/bin/chromium is absent).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from playwright.sync_api import expect

from finance.demo import seed_demo_finance
from tests.factories import UserFactory

CHROMIUM = Path("/usr/bin/chromium")
AXE = Path(settings.BASE_DIR) / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
PASSWORD = "browser-test-pw"
expect.set_options(timeout=30_000)  # generous: 2 shared cores in CI, and the SDK's retry backoff

BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="no browser: /usr/bin/chromium is absent (apt-get install chromium)"
    ),
]


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


def sign_in(page: Any, base_url: str) -> None:
    page.goto(f"{base_url}/login/")
    page.get_by_label("Username").fill("maya")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base_url}/chat/")


@pytest.fixture
def page(browser, live_server, demo):
    """maya signed in, at 1366 px."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)  # generous: 2 shared cores in CI
    sign_in(page, live_server.url)
    yield page
    context.close()


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """The serious and critical axe-core violations of the page as it is now (axe-core from npm, test-only)."""
    assert AXE.exists(), f"axe-core is not installed: run `npm ci` in {settings.BASE_DIR} (package.json)"
    page.add_script_tag(path=str(AXE))
    return page.evaluate(
        """async () => {
            const result = await axe.run(document, {resultTypes: ['violations']});
            return result.violations
                .filter(v => v.impact === 'serious' || v.impact === 'critical')
                .map(v => ({id: v.id, impact: v.impact, help: v.help,
                            nodes: v.nodes.slice(0, 5).map(n => n.target.join(' '))}));
        }"""
    )
