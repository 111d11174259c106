"""The AI SDK stream end to end (issue 31): the `ai` package's own client reads LIVE turns from real processes.

The Procfile's `stream:` (uvicorn) and `worker:` (Celery, on the embedded
broker) lines run on the test database, the recorded model (a fake Messages
API speaking the real streaming protocol) answering. The reader is the `ai`
package's `DefaultChatTransport` (our body and token through
`prepareSendMessagesRequest`, the reconnect through
`prepareReconnectToStreamRequest`) and `readUIMessageStream`
(tests/js/read_ui_stream.mjs). What it builds is checked against the stored
row (`GET /api/chat/sessions/<id>/`) and the turn's event log, exactly:

- the demo's "owe" turn (execute_sql run for real over maya's demo accounts: a
  `source-document`, an `accounts` target with both cards) and its catch-all
  IRA turn (the tax library: a `source-url`): text, sources, targets, tool parts;
- the reconnect (`GET …/events?protocol=ai-sdk`) replays the same message,
  whatever `Last-Event-ID` says; the headers and the framing;
- a failed turn: the `error` part with the user-facing message, then `[DONE]`.

Needs node and `npm ci`: skipped without them, failed under CI.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from chat.models import ChatLog
from live.errors import MESSAGES
from live.models import LiveTurn, LiveTurnStatus
from tests.ai_sdk_support import read_ui_message
from tests.live import ai_sdk_live_support
from tests.live.ai_sdk_live_support import RECORDED, check_headers, fetch, frames, logged, stored_row
from tests.live_support import script, step, text
from tests.procfile import ProcfileProcess

#: The Procfile's processes (once a module) and maya's token: fixtures of tests/live/ai_sdk_live_support.py, bound
#: here, as a plugin's `token` would meet tests/live/conftest.py's.
stream = ai_sdk_live_support.stream
token = ai_sdk_live_support.token

pytestmark = pytest.mark.django_db(transaction=True)


OWE, IRA = (next(s for s in RECORDED if s["name"] == name) for name in ("card-balances", "ira-limits"))
# maya's two cards in finance/demo_data.py, both "Credit card" in account_name (as tests/live/test_turns_demo.py).
SAPPHIRE = "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK"
DOUBLE_CASH = "LzdocJ2isAjIhKtJ0RlgLKOmxgJTeKdNnFRIB"
OVERLOADED = MESSAGES["overloaded_error"]
HALF = "Half an answer that will never end."


def ask(process: ProcfileProcess, token: str, session_id: str, message: str) -> dict[str, Any]:
    """POST `message` with the ai package's DefaultChatTransport; what readUIMessageStream built."""
    return read_ui_message(
        {
            "url": f"{process.base_url}/api/chat/sessions/{session_id}/turns/?protocol=ai-sdk",
            "headers": {"Authorization": f"Token {token}"},
            "body": {"message": message},
        }
    )


def reconnect(process: ProcfileProcess, token: str, turn_id: str, **headers: str) -> dict[str, Any]:
    """The ai package's reconnect (prepareReconnectToStreamRequest naming our events URL) to `turn_id`."""
    return read_ui_message(
        {
            "url": f"{process.base_url}/api/chat/turns/{turn_id}/events?protocol=ai-sdk",
            "method": "GET",
            "headers": {"Authorization": f"Token {token}", **headers},
        }
    )


def first_tool_use(recorded: dict[str, Any]) -> dict[str, Any]:
    return next(b for b in recorded["steps"][0]["message"]["content"] if b["type"] == "tool_use")


@pytest.mark.parametrize(
    ("question", "recorded", "lead"),
    [
        # execute_sql over maya's demo cards: text before the tool call, a source-document.
        ("How much do I owe on my cards?", OWE, "I'll look up your credit cards."),
        # The catch-all: read_tax_authority, no text before it, a source-url.
        ("How much can I put into my IRA for 2026?", IRA, ""),
    ],
    ids=["owe", "ira"],
)
def test_the_ai_package_builds_what_get_stores_and_a_reconnect_replays_it(
    stream, recorded_model_server, token, question, recorded, lead
):
    recorded_model_server.load(RECORDED)
    session_id = str(uuid.uuid4())

    result = ask(stream, token, session_id, question)
    assert result["status"] == "message" and result["errors"] == []
    message = result["message"]
    row = stored_row(stream, token, session_id)
    turn = LiveTurn.objects.get(pk=row["id"])
    assert (turn.status, turn.stop_reason, turn.user_message) == (LiveTurnStatus.DONE, "end_turn", question)

    # The message is the turn: its id the turn id (what a reconnect names), its metadata start's and done's.
    [done] = logged(row["id"], "done")
    assert message["id"] == row["id"] == done["log_id"]
    assert message["role"] == "assistant"
    assert message["metadata"] == {"turn_id": row["id"], "session_id": session_id, **done}
    assert done == {"log_id": row["id"], "session_id": session_id, "skipped_citations": {}, "stop_reason": "end_turn"}

    parts = message["parts"]
    # The same text: the text parts joined are the stored response.
    assert "".join(p["text"] for p in parts if p["type"] == "text") == row["response"]
    # The same targets and support: the data-citation parts are the stored inline citations, field for field.
    citation = row["inline_citations"][0]
    assert {c["source"] for c in row["inline_citations"]} == {citation["source"]}  # one source cited
    assert [p["data"] for p in parts if p["type"] == "data-citation"] == row["inline_citations"]
    assert [p["data"] for p in parts if p["type"] == "data-citations_summary"] == [row["citations"]]
    # The same sources: one part for the cited source, of the kind its target says.
    target = citation["target"]
    if recorded is OWE:
        assert citation["source"] == "silvia://your-account/credit-card"
        assert target == {
            "kind": "accounts",
            "accounts": [
                {"accountId": SAPPHIRE, "provider": "plaid"},  # first seen: the larger balance
                {"accountId": DOUBLE_CASH, "provider": "plaid"},
            ],
        }
        source = {
            "type": "source-document",
            "sourceId": citation["source"],
            "mediaType": "text/plain",
            "title": citation["title"],
        }
    else:
        assert target["kind"] == "tax_reference" and target["url"].startswith("https://www.irs.gov/")
        source = {
            "type": "source-url",
            "sourceId": citation["source"],
            "url": target["url"],
            "title": citation["title"],
        }
    # The tool part of the call the model made, run by our server, with the sources its result wrote.
    call = first_tool_use(recorded)
    assert logged(row["id"], "tool_call") == [{"id": call["id"], "name": call["name"], "input": call["input"]}]
    [logged_result] = logged(row["id"], "tool_result")
    tool_sources = [{"source": citation["source"], "title": citation["title"], "target": target}]
    assert logged_result == {"id": call["id"], "name": call["name"], "sources": tool_sources, "is_error": False}
    tool = {
        "type": f"tool-{call['name']}",
        "toolCallId": call["id"],
        "state": "output-available",
        "input": call["input"],
        "output": {"sources": tool_sources},
        "providerExecuted": True,
    }
    # The whole message, in order: each data-citation right after the text it cites (a citation ends a run of
    # text), the source part before its source's first citation. The recorded answers end with a text block
    # after the last cited one.
    units = row["response"].encode("utf-16-le")
    assert row["response"].startswith(lead)
    at = len(lead.encode("utf-16-le")) // 2
    answer_parts: list[dict[str, Any]] = []
    for cited in row["inline_citations"]:
        if cited["end"] > at:
            answer_parts.append(
                {"type": "text", "text": units[2 * at : 2 * cited["end"]].decode("utf-16-le"), "state": "done"}
            )
            at = cited["end"]
        answer_parts += [source] if cited is citation else []
        answer_parts.append({"type": "data-citation", "data": cited})
    after = units[2 * at :].decode("utf-16-le")
    assert after == recorded["steps"][-1]["message"]["content"][-1]["text"]
    leading = [{"type": "text", "text": lead, "state": "done"}] if lead else []
    assert parts == [
        {"type": "step-start"},
        *leading,
        tool,
        {"type": "step-start"},
        *answer_parts,
        {"type": "text", "text": after, "state": "done"},
        {"type": "data-citations_summary", "data": row["citations"]},
    ]

    # The reconnect replays the turn from its start: the same message, whatever Last-Event-ID says
    # (our stream would answer 204 to the turn's last id).
    assert reconnect(stream, token, row["id"]) == result
    assert reconnect(stream, token, row["id"], **{"Last-Event-ID": str(turn.last_seq)}) == result
    assert reconnect(stream, token, row["id"], **{"Last-Event-ID": "not-an-id"}) == result

    # On the wire: the protocol's headers, data frames only, `finish` then `[DONE]`.
    status, headers, body = fetch(stream, "GET", f"/api/chat/turns/{row['id']}/events?protocol=ai-sdk", token)
    assert status == 200
    check_headers(headers)
    sent = frames(body)
    assert json.loads(sent[0]) == {
        "type": "start",
        "messageId": row["id"],
        "messageMetadata": {"turn_id": row["id"], "session_id": session_id},
    }
    assert json.loads(sent[-2]) == {"type": "finish", "finishReason": "stop", "messageMetadata": done}
    assert sent[-1] == "[DONE]"


@pytest.mark.parametrize(
    ("failing", "said"),
    [
        # The API answers 529 (with its own text, which must not reach the user).
        (
            {"status": 529, "body": {"type": "error", "error": {"type": "overloaded_error", "message": "sk-ant-x"}}},
            "",
        ),
        # An `overloaded_error` event in the middle of the answer: some of its text went out first.
        ({**step(text(HALF)), "error_after": 5}, HALF),
    ],
    ids=["529", "mid-stream"],
)
def test_a_failed_turn_gives_the_error_part_with_our_message_then_done(
    stream, recorded_model_server, token, failing, said
):
    recorded_model_server.load([script(failing)])
    session_id = str(uuid.uuid4())

    result = ask(stream, token, session_id, "Hello?")
    turn = LiveTurn.objects.get(session_id=session_id)
    assert turn.status == LiveTurnStatus.FAILED
    assert turn.error == {"type": "overloaded_error", "message": OVERLOADED}
    # useChat's `error`: the error part's text, our message for a user (never the API's).
    assert result["errors"] == [OVERLOADED]
    texts = "".join(data["text"] for data in logged(str(turn.id), "text"))
    if said:
        assert texts and texts != said and said.startswith(texts)  # cut off by the error
    else:
        assert texts == ""
    assert result["message"] == {
        "id": str(turn.id),
        "role": "assistant",
        "metadata": {"turn_id": str(turn.id), "session_id": session_id, "error": turn.error},
        "parts": [{"type": "step-start"}, {"type": "text", "text": texts, "state": "done"}] if texts else [],
    }
    # Nothing is stored: the new session whose first turn failed does not exist.
    assert fetch(stream, "GET", f"/api/chat/sessions/{session_id}/", token)[0] == 404
    assert not ChatLog.objects.filter(session_id=uuid.UUID(session_id)).exists()

    # On the wire (the replay): the error part, its finish, then [DONE].
    status, headers, body = fetch(stream, "GET", f"/api/chat/turns/{turn.id}/events?protocol=ai-sdk", token)
    assert status == 200
    check_headers(headers)
    assert [json.loads(data) for data in frames(body)[-3:-1]] == [
        {"type": "error", "errorText": OVERLOADED},
        {"type": "finish", "finishReason": "error", "messageMetadata": {"error": turn.error}},
    ]
    assert frames(body)[-1] == "[DONE]"
    assert b"sk-ant" not in body
    assert reconnect(stream, token, str(turn.id)) == result
