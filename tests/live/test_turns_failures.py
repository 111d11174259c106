"""Live turns that go wrong (docs/live.md, issue 8), real SDK -> recorded model over HTTP: an error event mid
stream, API failures, 529 retried within the budget, a broken stream and a timeout, a failing tool, and text
or tool input PostgreSQL cannot store (NUL, lone surrogates)."""

from __future__ import annotations

from typing import Any

import pytest

from chat.models import ChatLog, ChatSession
from live.models import LiveTurn, LiveTurnStatus
from tests.ast_support import APPS
from tests.live import live_turns_support
from tests.live.live_turns_support import SCRIPTED, check_events_equal_get, post_turn, run_turn
from tests.live_support import cite, parse_frames, parse_sse, script, step, text, tool_use, tool_use_raw, wait_for_turns

#: maya's API client (tests/live/live_turns_support.py), bound here: it replaces pytest-django's `client`
#: for this module only.
client = live_turns_support.client


pytestmark = pytest.mark.django_db(transaction=True)


def test_error_event_mid_stream_saves_nothing(client, recorded_model):
    recorded_model.load([script(step(text("Half an answer that will never end."), error_after=5))])
    _, response = post_turn(client)
    events = parse_sse(b"".join(response.streaming_content))
    assert events[0][1] == "turn" and events[-1][1] == "error"
    assert events[-1][2] == {
        "error": {
            "type": "overloaded_error",
            "message": "The assistant is overloaded right now. Please try again in a moment.",
        }
    }
    assert ChatLog.objects.count() == 0
    turn = LiveTurn.objects.get()
    # It failed in its first step: no tool round, so no checkpoint (the worker builds its first state).
    assert turn.status == LiveTurnStatus.FAILED and turn.checkpoint is None


@pytest.mark.parametrize(
    ("status", "kind"),
    [(529, "overloaded_error"), (429, "rate_limit_error"), (500, "api_error"), (401, "authentication_error")],
)
def test_api_failures_end_with_error_and_save_nothing(client, recorded_model, status, kind):
    body = {"type": "error", "error": {"type": kind, "message": "secret detail sk-ant-xyz"}}
    recorded_model.load([script({"status": status, "body": body})])
    _, response = post_turn(client)
    events = parse_sse(b"".join(response.streaming_content))
    assert [name for _, name, _ in events] == ["turn", "error"]
    assert events[1][2]["error"]["type"] == kind
    assert "sk-ant" not in events[1][2]["error"]["message"]
    assert ChatLog.objects.count() == 0
    # 529/429/500 are retried within the budget (2 retries); a refused key is not.
    assert len(recorded_model.requests) == (1 if status == 401 else 3)


def test_529_then_success_within_the_retry_budget(client, recorded_model):
    overloaded = {
        "status": 529,
        "body": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    }
    session_id, events = run_turn(client, recorded_model, {"attempts": [overloaded, step(text("Fine."))]})
    assert check_events_equal_get(client, session_id, events)["response"] == "Fine."


def test_broken_stream_and_timeout(client, recorded_model, settings):
    # A connection dropped mid-stream is a cut stream (SPEC 11): asked again, then the turn fails.
    settings.LIVE_TURN_CUT_STREAM_RETRIES = 1
    recorded_model.load([script(step(text("This stream breaks in the middle."), break_after=4))])
    _, response = post_turn(client)
    assert parse_sse(b"".join(response.streaming_content))[-1][2]["error"]["type"] == "model_stream_cut"
    assert len(recorded_model.requests) == 2
    wait_for_turns()
    settings.ANTHROPIC_TIMEOUT_SECONDS = 0.3
    settings.ANTHROPIC_MAX_RETRIES = 0
    recorded_model.load([script(step(text("Slow."), delay_ms=1000))])
    _, response = post_turn(client, message="again")
    assert parse_sse(b"".join(response.streaming_content))[-1][2]["error"]["type"] == "timeout_error"
    assert ChatLog.objects.count() == 0


def test_failing_tool_gives_is_error_and_the_turn_goes_on(client, recorded_model):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(
            tool_use("toolu_1", "execute_sql", {"query": "DROP TABLE x"}),
            tool_use("toolu_2", "read_tax_authority", {"path": "../../etc/passwd"}),
        ),
        step(text("I could not read that.")),
    )
    check_events_equal_get(client, session_id, events)
    results = recorded_model.requests[1]["messages"][-1]["content"]
    assert [r["is_error"] for r in results] == [True, True]
    assert "unknown recorded query" in results[0]["content"] and "leaves the corpus folder" in results[1]["content"]


# --- text that cannot be stored as is ----------------------------------------------------


def test_a_nul_and_a_lone_surrogate_in_model_text_become_u_fffd(client, recorded_model, caplog):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(tool_use("toolu_1", "execute_sql", {"query": "total"})),
        step(
            text("Total \ud800 is $6,500.\x00", cite("silvia://your-portfolio", "total: 6500", "Your \udc00 portfolio"))
        ),
    )
    # The import of the same record would refuse these characters: compare the stream with GET only.
    SCRIPTED.pop(str(session_id))
    stored = check_events_equal_get(client, session_id, events)
    assert stored["response"] == "Total \ufffd is $6,500.\ufffd"
    assert stored["inline_citations"][0]["title"] == "Your \ufffd portfolio"
    assert events[-2][2]["content"][0]["text"] == "Total \ufffd is $6,500.\ufffd"  # the message event too
    assert "3 NUL or lone surrogate character(s) of the model's text replaced with U+FFFD" in caplog.text


ACCOUNT = "NPRVdD53X83RZJzzzzgEOzdmenCkhvMdgaKjI"


def test_a_nul_or_a_lone_surrogate_in_tool_input_gives_is_error_and_the_turn_goes_on(client, recorded_model, caplog):
    caplog.set_level("DEBUG")
    nul = tool_use_raw("toolu_1", "execute_sql", '{"query": "cards\\u0000"}')
    lone = tool_use_raw("toolu_2", "execute_sql", '{"query": "SELECT ' + ACCOUNT + ' \\ud800"}')
    bad_json = tool_use_raw("toolu_3", "execute_sql", '{"query": ' + ACCOUNT)
    session_id, events = run_turn(
        client,
        recorded_model,
        step(text("Let me look."), nul, lone, bad_json, tool_use("toolu_4", "execute_sql", {"query": "total"})),
        step(text("Your total is $6,500.", cite("silvia://your-portfolio", "total: 6500", "Your portfolio"))),
    )
    SCRIPTED.pop(str(session_id))  # the record would hold the inputs the import refuses
    stored = check_events_equal_get(client, session_id, events)
    assert stored["inline_citations"][0]["target"] == {"kind": "portfolio"}  # the good call ran
    results = recorded_model.requests[1]["messages"][-1]["content"]
    text_problem = "The tool input held a NUL character or a lone UTF-16 surrogate, which is not valid text."
    assert [(r["tool_use_id"], r.get("is_error"), r["content"]) for r in results[:3]] == [
        ("toolu_1", True, text_problem),
        ("toolu_2", True, text_problem),
        ("toolu_3", True, "The tool input was not valid JSON."),
    ]
    assert results[3]["content"][0]["source"] == "silvia://your-portfolio" and "is_error" not in results[3]
    # What went back to the model (and into the checkpoint) is storable text.
    inputs = [b["input"] for b in recorded_model.requests[1]["messages"][-2]["content"] if b["type"] == "tool_use"]
    assert inputs[:3] == [{"query": "cards\ufffd"}, {"query": f"SELECT {ACCOUNT} \ufffd"}, {}]
    # Our log lines name no input: the SDK's ValueError, which quoted the whole input, used to reach them.
    ours = [r for r in caplog.records if r.name.split(".")[0] in APPS]
    assert any("not run: its input is unusable" in r.getMessage() for r in ours)
    assert not any(ACCOUNT in r.getMessage() or r.exc_info for r in ours)


def test_a_session_another_user_took_while_the_turn_ran_refuses_the_save_and_nothing_of_it_is_kept(
    client, recorded_model, other_user
):
    """The save is refused at the end (the session is someone else's now): the runner's transaction, which
    holds the save and the last events and takes no savepoint of the save's own, rolls back whole; the turn
    fails with what its client reads."""
    recorded_model.load([{"name": "slow", "delay_ms": 20, "steps": [step(text("Your cards total $1,500. " * 20))]}])
    session_id, response = post_turn(client)
    chunks = iter(response.streaming_content)
    frames: list[tuple[int, str, Any]] = []
    while not any(name == "text" for _, name, _ in frames):
        frames += parse_frames(next(chunks))
    ChatSession.objects.create(id=session_id, user=other_user, title="theirs")
    for chunk in chunks:
        frames += parse_frames(chunk)
    assert frames[-1][1:] == (
        "error",
        {"error": {"type": "internal_error", "message": "This answer could not be saved. Please try again."}},
    )
    assert not any(name in ("citations_summary", "message", "done") for _, name, _ in frames)
    assert ChatLog.objects.count() == 0
    assert list(ChatSession.objects.values_list("id", "user_id", "title")) == [(session_id, other_user.pk, "theirs")]
    turn = LiveTurn.objects.get(session_id=session_id)
    assert turn.status == LiveTurnStatus.FAILED and turn.last_seq == frames[-1][0]
