"""How a live turn ends (docs/live.md#stop-reasons, #end-of-stream): pause_turn continued, max_tokens in text
and in a tool call, a reconnect after the end (204), and a turn whose events the database refuses ending
failed anyway."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from chat.models import ChatLog
from live.models import LiveTurn
from tests.live import live_turns_support
from tests.live.live_turns_support import CARDS, SCRIPTED, check_events_equal_get, post_turn, run_turn
from tests.live_support import cite, parse_frames, parse_sse, script, step, text, tool_use, tool_use_raw, wait_for_turns

#: maya's API client (tests/live/live_turns_support.py), bound here: it replaces pytest-django's `client`
#: for this module only.
client = live_turns_support.client


pytestmark = pytest.mark.django_db(transaction=True)


# --- stop reasons (docs/live.md#stop-reasons) ----------------------------------


def test_pause_turn_is_continued_with_the_assistant_content(client, recorded_model):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(text("Searching the web for current rates."), stop="pause_turn"),
        step(text("The rate is 4.1%.")),
    )
    stored = check_events_equal_get(client, session_id, events)
    # Each response is a model step: the continuation is joined by a blank line.
    assert stored["response"] == "Searching the web for current rates.\n\nThe rate is 4.1%."
    assert events[-1][2]["stop_reason"] == "end_turn"
    # The paused content went back as it came, with no new user message after it.
    first, second = recorded_model.requests
    assert second["messages"] == [
        *first["messages"],
        {"role": "assistant", "content": [{"type": "text", "text": "Searching the web for current rates."}]},
    ]


def test_pause_turn_counts_against_the_step_budget(client, recorded_model, settings):
    settings.LIVE_TURN_MAX_STEPS = 1
    paused = step(text("Still searching."), stop="pause_turn")
    recorded_model.load([script(paused, paused, step(text("Never reached.")))])
    _, response = post_turn(client)
    events = parse_sse(b"".join(response.streaming_content))
    assert events[-1][1] == "error" and events[-1][2]["error"]["type"] == "max_steps"
    assert len(recorded_model.requests) == 2 and ChatLog.objects.count() == 0


def test_max_tokens_in_text_is_stored_and_done_says_so(client, recorded_model):
    session_id, events = run_turn(client, recorded_model, step(text("Your cards total $1,5"), stop="max_tokens"))
    stored = check_events_equal_get(client, session_id, events)
    assert stored["response"] == "Your cards total $1,5"
    assert events[-1][2]["stop_reason"] == "max_tokens" and events[-2][2]["stop_reason"] == "max_tokens"
    assert LiveTurn.objects.get().stop_reason == "max_tokens"


CUT = step(text("Let me check your cards."), tool_use_raw("toolu_1", "execute_sql", '{"query": "ca'), stop="max_tokens")


def test_a_tool_call_cut_off_at_max_tokens_is_asked_again_with_twice_the_tokens(client, recorded_model, settings):
    settings.ANTHROPIC_MAX_TOKENS = 1000
    whole = step(text("Checking your cards."), tool_use("toolu_1", "execute_sql", {"query": "cards"}))
    answer = step(text("You owe $1,500.", cite(CARDS, "account_name: Credit card; balance: 1200", "Credit card")))
    recorded_model.load([script({"attempts": [CUT, whole]}, answer)])
    session_id, response = post_turn(client)
    body = b"".join(response.streaming_content)
    frames = parse_frames(body)
    # The cut step streamed its text; the rewind drops it before the second attempt streams.
    cut_text = [
        seq for seq, name, data in frames if name == "text" and data["text"] in ("Let me check", " your cards.")
    ]
    rewind = next(data for _, name, data in frames if name == "rewind")
    assert cut_text == [2, 3] and rewind == {"to": 1, "answer": ""}
    assert [r["max_tokens"] for r in recorded_model.requests] == [1000, 2000, 1000]
    SCRIPTED[str(session_id)] = [whole, answer]
    stored = check_events_equal_get(client, session_id, parse_sse(body))
    assert stored["response"] == "Checking your cards.\n\nYou owe $1,500."
    assert stored["inline_citations"][0]["target"]["kind"] == "accounts"


def test_a_tool_call_cut_off_twice_fails_the_turn(client, recorded_model):
    recorded_model.load([script({"attempts": [CUT, CUT]})])
    _, response = post_turn(client)
    events = parse_sse(b"".join(response.streaming_content))
    message = "The assistant ran out of room before it could look something up. Please ask for less at once."
    assert events[-1][1:] == ("error", {"error": {"type": "max_tokens", "message": message}})
    assert len(recorded_model.requests) == 2 and ChatLog.objects.count() == 0
    assert LiveTurn.objects.get().status == "failed"


# --- the end of a stream (docs/live.md#end-of-stream) ---------------------------------


def events_after(client, turn_id, last):
    return client.get(f"/api/chat/turns/{turn_id}/events", HTTP_LAST_EVENT_ID=str(last))


@pytest.mark.parametrize("fails", [False, True], ids=["done", "error"])
def test_a_reconnect_holding_every_event_of_an_ended_turn_is_204(client, recorded_model, fails):
    extra: dict[str, Any] = {"error_after": 5} if fails else {}
    answer = step(text("Half an answer that will never end."), **extra)
    recorded_model.load([script(answer)])
    _, response = post_turn(client)
    events = parse_sse(b"".join(response.streaming_content))
    assert events[-1][1] == ("error" if fails else "done")
    turn_id, last = events[0][2]["turn_id"], events[-1][0]
    ended = events_after(client, turn_id, last)
    assert ended.status_code == 204 and ended.content == b""
    assert events_after(client, turn_id, last + 5).status_code == 204
    missing_one = events_after(client, turn_id, last - 1)
    assert missing_one.status_code == 200
    assert parse_sse(b"".join(missing_one.streaming_content)) == events[-1:]


def refuse_events(names):
    """Make the database refuse appending events named `names` (a real refusal: a trigger or a check)."""
    listed = ", ".join(f"'{name}'" for name in names)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "ALTER TABLE chat_live_turn_events ADD CONSTRAINT test_refused_events "
                f"CHECK (event NOT IN ({listed})) NOT VALID"
            )
        else:
            cursor.execute(
                "CREATE TRIGGER test_refused_events BEFORE INSERT ON chat_live_turn_events "
                f"WHEN NEW.event IN ({listed}) BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            )


def accept_events():
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE chat_live_turn_events DROP CONSTRAINT IF EXISTS test_refused_events")
        else:
            cursor.execute("DROP TRIGGER IF EXISTS test_refused_events")


@pytest.mark.parametrize("refused", [["text"], ["text", "error"]], ids=["its-events", "its-events-and-its-error"])
def test_a_turn_that_cannot_write_its_events_ends_failed_anyway(client, recorded_model, refused):
    recorded_model.load([script(step(text("An answer the log will refuse.")))])
    refuse_events(refused)
    try:
        _, response = post_turn(client)
        events = parse_sse(b"".join(response.streaming_content))  # the stream ends: no turn left running
        assert wait_for_turns(30)
    finally:
        accept_events()
    turn = LiveTurn.objects.get()
    internal = {"type": "internal_error", "message": "Something went wrong on our side. Please try again."}
    assert turn.status == "failed" and turn.error == internal and turn.finished_at is not None
    if "error" in refused:
        assert [name for _, name, _ in events] == ["turn"] and turn.last_seq == 1
    else:
        assert [name for _, name, _ in events] == ["turn", "error"] and events[-1][2] == {"error": internal}
    assert events_after(client, turn.id, turn.last_seq).status_code == 204
    assert ChatLog.objects.count() == 0
