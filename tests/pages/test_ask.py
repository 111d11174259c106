"""Stopping an answer and deleting a conversation from the pages, in a real browser (issue 39; docs/pages.md):
Playwright driving Debian's chromium against `live_server`, the real endpoint, the real SDK against the recorded
model streaming slowly, the production task on Celery's test worker.

Skipped, with the reason, only when /usr/bin/chromium is absent."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import expect

from chat.models import ChatLog, ChatSession
from live.models import LiveTurn, LiveTurnEvent
from tests.browser_fixtures import BROWSER_MARKS
from tests.live_support import script, step, text

pytestmark = BROWSER_MARKS

CARDS = uuid.UUID("d93ada3e-af5f-4e4e-823c-781fec71f26d")
LONG = "Your cards, one by one, slowly. " * 40


def test_stop_while_the_answer_streams(page, live_server, recorded_model):
    recorded_model.load([{**script(step(text(LONG))), "delay_ms": 60}, script(step(text("Short and done.")))])
    before = ChatLog.objects.count()
    page.goto(f"{live_server.url}/chat/new/")
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_hidden()
    page.get_by_label("Your question").fill("Tell me about my cards")
    page.get_by_role("button", name="Ask").click()
    live = page.locator("article.turn--live .turn__live")
    expect(live).to_contain_text("Your cards, one by one")
    expect(stop).to_be_visible()
    stop.click()
    status = page.locator("#ask-status")
    expect(status).to_have_text("You stopped this answer.")
    expect(status).to_have_class("ask__status")  # not shown as an error: the user asked for it
    expect(stop).to_be_hidden()
    expect(page.get_by_role("button", name="Ask")).to_be_enabled()
    shown = page.locator("article.turn--stopped .turn__live").inner_text()
    assert shown and len(shown) < len(LONG)  # what streamed stays on screen
    assert ChatLog.objects.count() == before  # and is not stored
    [turn] = LiveTurn.objects.all()
    assert turn.error == {"type": "stopped", "message": "You stopped this answer."}
    assert LiveTurnEvent.objects.filter(turn=turn).order_by("-seq").values_list("event", flat=True)[0] == "error"
    # The conversation takes a new question at once.
    page.get_by_label("Your question").fill("Are you done?")
    page.get_by_role("button", name="Ask").click()
    expect(status).to_have_text("Answer saved.")
    assert ChatLog.objects.filter(session_id=turn.session_id).count() == 1


def test_delete_a_conversation_after_confirming(page, live_server):
    assert ChatLog.objects.filter(session_id=CARDS).count() == 3
    page.goto(f"{live_server.url}/chat/{CARDS}/")
    expect(page.get_by_role("link", name="Markdown")).to_have_attribute(
        "href", f"/api/chat/sessions/{CARDS}/export?format=md"
    )
    page.get_by_role("link", name="Delete conversation").click()
    expect(page.get_by_role("heading", name="Delete this conversation?")).to_be_visible()
    expect(page.locator(".card")).to_contain_text("“Card balances” and its 3 questions and answers will be deleted")
    assert ChatSession.objects.filter(pk=CARDS).exists()  # nothing happens before the confirmation
    page.get_by_role("button", name="Delete conversation").click()
    page.wait_for_url(f"{live_server.url}/chat/")
    expect(page.get_by_role("status")).to_have_text("Deleted “Card balances”.")
    expect(page.get_by_role("link", name=re.compile("Card balances"))).to_have_count(0)
    assert not ChatSession.objects.filter(pk=CARDS).exists()
    assert not ChatLog.objects.filter(session_id=CARDS).exists()
    assert page.goto(f"{live_server.url}/chat/{CARDS}/").status == 404


def test_the_markdown_download_is_the_export(page, live_server):
    page.goto(f"{live_server.url}/chat/{CARDS}/")
    with page.expect_download() as download:
        page.get_by_role("link", name="Markdown").click()
    path = download.value.path()
    assert download.value.suggested_filename == f"silvia-conversation-{CARDS}.md"
    with open(path, encoding="utf-8") as file:
        assert file.read().startswith("# Card balances\n")
