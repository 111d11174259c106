"""Live turns (docs/live.md, issue 8): real SDK -> recorded model over HTTP; events == GET == an import."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from chat.models import ChatLog, LiveTurn, LiveTurnStatus
from chat.services import record_turn
from tests.ast_support import APPS
from tests.live_support import (
    cite,
    parse_frames,
    parse_sse,
    record_of,
    script,
    step,
    text,
    tool_use,
    tool_use_raw,
    wait_for_turns,
)

pytestmark = pytest.mark.django_db(transaction=True)

CARDS = "silvia://your-account/credit-card"
CHASE = "silvia://credit-card-corpus/chase/sapphire-preferred/pricing.md"


@pytest.fixture
def client(maya):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=maya).key}")
    return api


def post_turn(client, session_id=None, message="How much do I owe on my cards?", **extra):
    session_id = session_id or uuid.uuid4()
    response = client.post(f"/api/chat/sessions/{session_id}/turns/", {"message": message, **extra}, format="json")
    return session_id, response


#: The steps each session's turn ran, for `check_events_equal_get`'s import of the same turn.
SCRIPTED: dict[str, list[dict]] = {}


def run_turn(client, recorded_model, *steps, **extra):
    recorded_model.load([script(*steps)])
    session_id, response = post_turn(client, **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/event-stream")
    body = b"".join(response.streaming_content)
    assert body.startswith(b"retry: 3000\n\n") and body.count(b"retry:") == 1  # docs/live.md#the-wire-format
    SCRIPTED[str(session_id)] = list(steps)
    return session_id, parse_sse(body)


def check_events_equal_get(client, session_id, events):
    """docs/live.md: what the events carried (`rewind` applied) == what GET returns, field for field;
    and an import of the same turn (`record_of`) stores the same row."""
    names = [name for _, name, _ in events]
    assert names[0] == "turn" and names[-3:] == ["citations_summary", "message", "done"]
    ids = [seq for seq, _, _ in events]
    assert ids == sorted(set(ids)) and ids[0] == 1
    body = client.get(f"/api/chat/sessions/{session_id}/").json()
    stored = body["messages"][-1]
    done = events[-1][2]
    assert stored["id"] == done["log_id"] and done["session_id"] == str(session_id)
    assert stored["response"] == "".join(data["text"] for _, name, data in events if name == "text")
    assert stored["inline_citations"] == [data["citation"] for _, name, data in events if name == "citation"]
    assert stored["citations"] == events[-3][2]["citations"]
    assert stored["model"] == events[-2][2]["model"]
    assert done["stop_reason"] == events[-2][2]["stop_reason"] == LiveTurn.objects.get(pk=done["log_id"]).stop_reason
    steps = SCRIPTED.get(str(session_id))
    if steps is not None:  # the one assembler: fed whole blocks (an import), the same row
        live = ChatLog.objects.get(pk=done["log_id"])
        imported = record_turn(record_of(steps, user=live.user, message=live.user_message), user=live.user)
        assert (imported.response, imported.citations, imported.inline_citations, imported.model) == (
            live.response,
            live.citations,
            live.inline_citations,
            live.model,
        )
        imported.delete()
    return stored


def test_two_steps_with_a_tool_between_them(client, recorded_model):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(
            text("Let me check the card terms."),
            tool_use("toolu_1", "read_credit_card_document", {"path": "chase/sapphire-preferred/pricing.md"}),
        ),
        step(
            text("The annual fee is $95.", cite(CHASE, "- Annual fee: $95", "Sapphire Preferred pricing and terms")),
            text(" Purchases cost 20.24% to 27.24%."),
        ),
    )
    stored = check_events_equal_get(client, session_id, events)
    assert (
        stored["response"] == "Let me check the card terms.\n\nThe annual fee is $95. Purchases cost 20.24% to 27.24%."
    )
    assert stored["inline_citations"] == [
        {
            "source": CHASE,
            "title": "Sapphire Preferred pricing and terms",
            "cited_text": "- Annual fee: $95",
            "start": 30,
            "end": 52,
            "target": {"kind": "card_document", "url": None},
        }
    ]
    # The model saw the tool result as a search_result block with citations on.
    tool_result = recorded_model.requests[1]["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["content"][0]["type"] == "search_result"
    assert tool_result["content"][0]["source"] == CHASE and tool_result["content"][0]["citations"] == {"enabled": True}
    assert events[-1][2]["skipped_citations"] == {}
    assert LiveTurn.objects.get().status == LiveTurnStatus.DONE and LiveTurn.objects.get().checkpoint is None


def test_pooled_account_label(client, recorded_model):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(tool_use("toolu_1", "execute_sql", {"query": "cards"})),
        step(
            text(
                "You owe $1,500 on your cards.", cite(CARDS, "account_name: Credit card; balance: 1200", "Credit card")
            )
        ),
    )
    stored = check_events_equal_get(client, session_id, events)
    assert stored["inline_citations"][0]["target"] == {
        "kind": "accounts",
        "accounts": [
            {"accountId": "CARDaaaaaaaaaaaaaaaa1", "provider": "plaid"},
            {"accountId": "CARDbbbbbbbbbbbbbbbb2", "provider": "plaid"},
        ],
    }
    assert (stored["inline_citations"][0]["start"], stored["inline_citations"][0]["end"]) == (0, 29)


def test_disagreement_leaves_source_untyped(client, recorded_model):
    checking = "silvia://your-account/checking"
    session_id, events = run_turn(
        client,
        recorded_model,
        step(tool_use("toolu_1", "execute_sql", {"query": "checking"})),
        step(
            text("Checking holds $5,000.", cite(checking, "balance: 5000", "Checking")),
            tool_use("toolu_2", "execute_sql", {"query": "checking-unknown"}),
        ),
        step(text("Still $5,000.", cite(checking, "balance: 5000", "Checking"))),
    )
    stored = check_events_equal_get(client, session_id, events)
    first, second = stored["inline_citations"]
    assert first["target"] == {"kind": "account", "accountId": "CHKaaaaaaaaaaaaaaaaa1", "provider": "plaid"}
    assert "target" not in second  # the second write had no account: untyped from then on
    assert (second["start"], second["end"]) == (24, 37)


def test_emoji_before_a_citation(client, recorded_model):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(tool_use("toolu_1", "execute_sql", {"query": "total"})),
        step(text("💰 Total: "), text("$6,500", cite("silvia://your-portfolio", "total: 6500", "Your portfolio"))),
    )
    stored = check_events_equal_get(client, session_id, events)
    # "💰" is two UTF-16 code units: "💰 Total: " is 10 units long.
    assert (stored["inline_citations"][0]["start"], stored["inline_citations"][0]["end"]) == (10, 16)
    assert stored["inline_citations"][0]["target"] == {"kind": "portfolio"}


def test_citation_with_no_text_around_it(client, recorded_model):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(text("Checking first."), tool_use("toolu_1", "execute_sql", {"query": "total"})),
        step(text("", cite("silvia://your-portfolio", "total: 6500", "Your portfolio"), first=True)),
    )
    stored = check_events_equal_get(client, session_id, events)
    # A step without text adds nothing to the answer: the empty span sits at its end.
    assert stored["response"] == "Checking first."
    assert [(c["start"], c["end"]) for c in stored["inline_citations"]] == [(15, 15)]
    assert [name for _, name, _ in events].count("citation") == 1


def test_citation_of_a_source_the_turn_never_wrote(client, recorded_model):
    session_id, events = run_turn(
        client,
        recorded_model,
        step(text("Your portfolio is up.", cite("silvia://your-portfolio", "total: 1", "Your portfolio"))),
    )
    stored = check_events_equal_get(client, session_id, events)
    assert "target" not in stored["inline_citations"][0]


def test_other_citation_types_are_counted_not_stored(client, recorded_model):
    web = {
        "type": "web_search_result_location",
        "url": "https://www.irs.gov/publications/p590a",
        "title": "Publication 590-A",
        "cited_text": "You can contribute...",
        "encrypted_index": "abc",
    }
    page = {
        "type": "page_location",
        "cited_text": "x",
        "document_index": 0,
        "document_title": None,
        "start_page_number": 1,
        "end_page_number": 2,
    }
    search_block = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://www.irs.gov/publications/p590a",
                "title": "Publication 590-A",
                "encrypted_content": "e",
                "page_age": None,
            }
        ],
    }
    session_id, events = run_turn(
        client,
        recorded_model,
        step(search_block, text("IRA limits apply.", web, page)),
    )
    stored = check_events_equal_get(client, session_id, events)
    assert stored["inline_citations"] == [
        {
            "source": "https://www.irs.gov/publications/p590a",
            "title": "Publication 590-A",
            "cited_text": "You can contribute...",
            "start": 0,
            "end": 17,
            "target": {"kind": "web", "url": "https://www.irs.gov/publications/p590a"},
        }
    ]
    assert events[-1][2]["skipped_citations"] == {"page_location": 1}


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
    recorded_model.load([script(step(text("This stream breaks in the middle."), break_after=4))])
    _, response = post_turn(client)
    assert parse_sse(b"".join(response.streaming_content))[-1][2]["error"]["type"] == "connection_error"
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


def test_history_is_text_only(client, recorded_model):
    session_id, _ = run_turn(
        client,
        recorded_model,
        step(tool_use("toolu_1", "execute_sql", {"query": "total"})),
        step(text("Total $6,500.", cite("silvia://your-portfolio", "total: 6500"))),
    )
    wait_for_turns()
    again = step(text("Same as before.", cite("silvia://your-portfolio", "total: 6500")))
    recorded_model.load([script(again)])
    SCRIPTED[str(session_id)] = [again]
    _, response = post_turn(client, session_id=session_id, message="And now?")
    events = parse_sse(b"".join(response.streaming_content))
    assert recorded_model.requests[0]["messages"] == [
        {"role": "user", "content": "How much do I owe on my cards?"},
        {"role": "assistant", "content": "Total $6,500."},
        {"role": "user", "content": "And now?"},
    ]
    # The earlier turn's source is not this turn's: untyped.
    assert "target" not in check_events_equal_get(client, session_id, events)["inline_citations"][0]


def test_legacy_prompt_has_no_citation_table(client, recorded_model):
    run_turn(client, recorded_model, step(text("Hi.")), prompt_version="legacy")
    assert "source_account_id" not in recorded_model.requests[0]["system"]
    wait_for_turns()
    run_turn(client, recorded_model, step(text("Hi.")))
    assert "source_account_id" in recorded_model.requests[0]["system"]


# --- requests refused -------------------------------------------------------


def test_no_credentials_is_401(recorded_model):
    response = APIClient().post(f"/api/chat/sessions/{uuid.uuid4()}/turns/", {"message": "hi"}, format="json")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"


def test_another_users_session_is_404(client, recorded_model, other_user):
    from chat.models import ChatSession

    session = ChatSession.objects.create(user=other_user)
    _, response = post_turn(client, session_id=session.id)
    assert response.status_code == 404 and response.json() == {"detail": "Not found."}
    _, response = post_turn(client, session_id="not-a-uuid")
    assert response.status_code == 404
    assert LiveTurn.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({}, "message", "This field is required."),
        ({"message": ""}, "message", "This field may not be blank."),
        ({"message": "   "}, "message", "This field may not be blank."),
        ({"message": "x" * 20001}, "message", "Ensure this field has no more than 20000 characters."),
        ({"message": "hi", "prompt_version": "v4"}, "prompt_version", '"v4" is not a valid choice.'),
        ({"message": 12}, "message", "Expected a string."),
    ],
)
def test_bad_body_is_400(client, recorded_model, body, field, message):
    response = client.post(f"/api/chat/sessions/{uuid.uuid4()}/turns/", body, format="json")
    assert response.status_code == 400 and response.json() == {field: [message]}
    assert LiveTurn.objects.count() == 0


def test_two_concurrent_posts_to_one_session(client, recorded_model, maya):
    recorded_model.load([script(step(text("A slow answer to make the turn last."), delay_ms=30))])
    session_id = uuid.uuid4()
    statuses: list[int] = []

    def post():
        api = APIClient()
        api.force_authenticate(maya)
        response = api.post(f"/api/chat/sessions/{session_id}/turns/", {"message": "hi"}, format="json")
        statuses.append(response.status_code)
        if response.status_code == 200:
            b"".join(response.streaming_content)  # type: ignore[attr-defined]
        connection.close()  # this thread's own connection

    threads = [threading.Thread(target=post) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(statuses) == [200, 409]
    assert LiveTurn.objects.count() == 1


def test_events_of_another_users_turn_is_404(client, recorded_model, other_user):
    _, events = run_turn(client, recorded_model, step(text("Hi.")))
    turn_id = events[0][2]["turn_id"]
    api = APIClient()
    api.force_authenticate(other_user)
    assert api.get(f"/api/chat/turns/{turn_id}/events").status_code == 404
    assert client.get(f"/api/chat/turns/{uuid.uuid4()}/events").status_code == 404
    assert client.get(f"/api/chat/turns/{turn_id}/events", HTTP_LAST_EVENT_ID="x").status_code == 400
    replay = parse_sse(
        b"".join(client.get(f"/api/chat/turns/{turn_id}/events", HTTP_LAST_EVENT_ID="2").streaming_content)
    )
    assert replay == events[2:]
    assert json.loads(json.dumps(replay)) == json.loads(json.dumps(events[2:]))


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
