"""A browser's EventSource stops after a turn's `done` or `error` (docs/live.md#end-of-stream).

Real Chromium (Playwright, /usr/bin/chromium) runs a bare EventSource page of
this test's own against a real uvicorn process; the turns are real (the SDK
against the recorded model). The stream closes after the last event, the
EventSource reconnects once with `Last-Event-ID`, gets 204 and stops.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.live_support import ServerProcess, SSEClient, script, step, text

CHROMIUM = Path("/usr/bin/chromium")
RETRY_MS = 300

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="no browser: /usr/bin/chromium is absent (apt-get install chromium)"
    ),
]

# The page: one EventSource on the turn's events URL, recording what it gets.
PAGE = """<!doctype html><meta charset="utf-8"><title>EventSource</title><script>
window.seen = {events: [], errors: [], opens: 0};
const source = new EventSource("/api/chat/turns/" + location.hash.slice(1) + "/events");
source.onopen = () => { window.seen.opens += 1; };
for (const name of ["turn", "text", "citation", "citations_summary", "message", "done", "rewind"]) {
  source.addEventListener(name, (event) => window.seen.events.push([Number(event.lastEventId), name]));
}
// The turn's `error` event and a network error or the close both come here: `data` tells them apart.
source.addEventListener("error", (event) => {
  window.seen.errors.push({data: event.data === undefined ? null : JSON.parse(event.data),
                           state: source.readyState});
});
</script>"""


@pytest.fixture(scope="module")
def browser():
    # Playwright's sync API runs an event loop in this thread, which Django's async-safety check would refuse.
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
def server(recorded_model):
    process = ServerProcess(
        {
            "ANTHROPIC_BASE_URL": recorded_model.base_url,
            "ANTHROPIC_API_KEY": "test-key",
            "LIVE_SSE_RETRY_MS": str(RETRY_MS),
            "LIVE_TURN_POLL_SECONDS": "0.05",
        }
    )
    yield process
    process.stop()


def ended_turn(server, maya):
    """A turn run to its end through the server; its events as sent."""
    post = SSEClient(
        server.base_url,
        "POST",
        f"/api/chat/sessions/{uuid.uuid4()}/turns/",
        Token.objects.get_or_create(user=maya)[0].key,
        {"message": "How much do I owe?"},
    )
    events = post.events()
    post.close()
    return events


@pytest.mark.parametrize("fails", [False, True], ids=["after-done", "after-error"])
def test_the_eventsource_stops_on_204(browser, server, recorded_model, maya, fails):
    extra: dict[str, Any] = {"error_after": 5} if fails else {}
    recorded_model.load([script(step(text("Half an answer that will never end."), **extra))])
    events = ended_turn(server, maya)
    assert events[-1][1] == ("error" if fails else "done")
    turn_id = events[0][2]["turn_id"]

    signed_in = Client()
    signed_in.force_login(maya)
    context = browser.new_context()
    context.add_cookies([{"name": "sessionid", "value": signed_in.cookies["sessionid"].value, "url": server.base_url}])
    page = context.new_page()
    statuses: list[int] = []
    page.on("response", lambda r: statuses.append(r.status) if r.url.endswith("/events") else None)
    page.route(f"{server.base_url}/eventsource-test", lambda route: route.fulfill(body=PAGE, content_type="text/html"))
    page.goto(f"{server.base_url}/eventsource-test#{turn_id}")
    page.wait_for_function("window.seen.errors.some(e => e.state === EventSource.CLOSED)", timeout=30_000)
    # CLOSED is for good (the HTML standard): no reconnect can come after it, so nothing is waited for but
    # the last response's event, which Playwright may hand over just after the state changed.
    deadline = time.monotonic() + 10
    while len(statuses) < 2 and time.monotonic() < deadline:
        page.wait_for_timeout(20)
    seen = page.evaluate("window.seen")
    context.close()

    # One stream read every event; one reconnect (its Last-Event-ID the last id: the server
    # answers 204 to nothing else) got 204; nothing after.
    assert statuses == [200, 204]
    assert seen["opens"] == 1
    named = [(seq, name) for seq, name, _ in events if name != "error"]
    assert seen["events"] == [[seq, name] for seq, name in named]
    # The stream's end: a plain error, the EventSource CONNECTING again; the 204: a plain error, CLOSED.
    ends = [{"data": None, "state": 0}, {"data": None, "state": 2}]
    if fails:
        # The turn's `error` event comes first, while the stream is OPEN, and carries its data.
        assert seen["errors"] == [{"data": events[-1][2], "state": 1}, *ends]
    else:
        assert seen["errors"] == ends
