"""One live turn's trace in this process (issue 31 item 3; docs/metrics.md#traces): a turn POSTed through the
API and run by the embedded Celery worker (`live_worker`) against the recorded model, its spans collected by
the SDK's in-memory exporter: the exact span tree, one trace from the web's admission to the worker, the
GenAI attributes with the values the recorded script makes, failures and refusals by type only, and no user
data in any exported span."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from chat.models import ChatLog
from finance import demo_data
from live.models import LiveTurn
from tests.live_support import parse_sse, script, step, text, tool_use
from tests.telemetry.tracing_support import QUESTION, TASK, attrs, began, by_name, exported_text, leaked

RECORDED_MODEL = "recorded-model-not-claude"
MESSAGE_ID = re.compile(r"msg_rec_[0-9a-f]{20}")


def finished(exporter: InMemorySpanExporter, name: str, count: int = 1, timeout: float = 30.0) -> list[ReadableSpan]:
    """The spans once `count` of them are named `name` (the worker ends its `process` span after the client
    read `done`)."""
    deadline = time.monotonic() + timeout
    while True:
        spans = list(exporter.get_finished_spans())
        if sum(span.name == name for span in spans) >= count or time.monotonic() > deadline:
            return spans
        time.sleep(0.02)


def ended(span: ReadableSpan) -> int:
    assert span.end_time is not None
    return span.end_time


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def demo_user_data() -> list[str]:
    """What the demo holds of maya and sam (finance/demo_data.py): ids, tokens, names of accounts."""
    values = [demo_data.MAYA_CLERK, demo_data.SAM_CLERK]
    for connections in (demo_data.MAYA, demo_data.SAM):
        for _source, _institution, item_id, access_token, accounts in connections:
            values += [item_id, access_token]
            for account in accounts:
                values += [
                    str(value)
                    for key, value in account.items()
                    if key.endswith("_id") or key in ("display_name", "official_name")
                ]
    return values


# --- one turn in this process: the span tree -------------------------------------------------------------------


def test_a_live_turn_is_one_trace_from_the_post_through_the_queue_to_the_worker(
    maya, recorded_model, settings, spans, live_worker
):
    from tests.live.test_turns_demo import demo_turn

    client, session_id, body = demo_turn(maya, recorded_model, settings, QUESTION)
    events = parse_sse(body)
    turn_id = events[0][2]["turn_id"]
    assert events[-1][1] == "done"
    exported = finished(spans, f"process {TASK}")

    # One trace, from the web's admission to the worker's last write.
    assert {span.context.trace_id for span in exported} == {exported[0].context.trace_id}
    [start] = by_name(exported, "start_turn")
    [send] = by_name(exported, f"send {TASK}")
    [process] = by_name(exported, f"process {TASK}")
    chats = by_name(exported, f"chat {settings.ANTHROPIC_MODEL}")
    [tool] = by_name(exported, "execute_tool execute_sql")
    [checkpoint] = by_name(exported, "save_checkpoint")
    [save] = by_name(exported, "save_turn")
    writes = by_name(exported, "write_events")
    assert len(exported) == 8 + len(writes)  # the spans named here, and nothing else

    assert (start.kind, parent_of(start)) == (SpanKind.INTERNAL, None)
    assert (send.kind, parent_of(send)) == (SpanKind.PRODUCER, start.context.span_id)
    assert (process.kind, parent_of(process)) == (SpanKind.CONSUMER, send.context.span_id)
    # Under the worker's span, in the order the turn ran them: step 1 (a tool call), the tool, the
    # checkpoint after the tool round, step 2 (the answer), the stored turn.
    under_process = [span for span in exported if parent_of(span) == process.context.span_id]
    assert [span.name for span in sorted(under_process, key=began) if span not in writes] == [
        f"chat {settings.ANTHROPIC_MODEL}",
        "execute_tool execute_sql",
        "save_checkpoint",
        f"chat {settings.ANTHROPIC_MODEL}",
        "save_turn",
    ]
    assert [span.kind for span in chats] == [SpanKind.CLIENT, SpanKind.CLIENT]
    # Batches are written by the turn's thread (under the step streaming, or the turn between steps) or by
    # the flusher thread (under the turn); between them, every event after the web's `turn` and before the
    # three the stored turn writes (citations_summary, message, done).
    assert {parent_of(span) for span in writes} <= {process.context.span_id, *(c.context.span_id for c in chats)}
    last_seq = LiveTurn.objects.get(pk=turn_id).last_seq
    assert sum(attrs(span)["silvia.events.count"] for span in writes) == last_seq - 1 - 3
    assert all(attrs(span)["silvia.events.count"] >= 1 for span in writes)
    assert {span.status.status_code for span in exported} == {StatusCode.UNSET}

    # What each span says.
    messaging = {
        "messaging.system": "memory",  # the embedded test worker's transport (tests/conftest.py)
        "messaging.destination.name": live_worker.conf.task_default_queue,
        "messaging.message.id": attrs(send)["messaging.message.id"],
        "silvia.turn.id": turn_id,
    }
    assert attrs(start) == {"silvia.turn.id": turn_id}
    assert uuid.UUID(attrs(send)["messaging.message.id"])
    assert attrs(send) == {
        **messaging,
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
    }
    wait = attrs(process)["silvia.queue.wait_seconds"]
    # From the send (its time in the task's headers, to the microsecond) to the worker taking the task.
    assert 0 <= wait <= (began(process) - began(send)) / 1e9 + 1e-5
    assert attrs(process) == {
        **messaging,
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "silvia.queue.wait_seconds": wait,
    }
    # examples/recorded/20-card-balances.json: each step's usage is the recorded model's, 100 tokens in and one
    # out per 12-character text delta (devtools/recorded_stream.py): step 1 "I'll look up your credit cards."
    # (31 characters: 3), step 2 "Here is what you owe: " (22: 2), "$2,930.35 across your two credit cards"
    # (38: 4), ", " (1), "$2,318.45 on one and $611.90 on the other" (41: 4), ". You can still spend " (22: 2),
    # "$17,069.65 before reaching your limits, so you are using about 15% of them" (74: 7) and "." (1): 21.
    request = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.system": "anthropic",
        "gen_ai.request.model": settings.ANTHROPIC_MODEL,
        "gen_ai.request.max_tokens": settings.ANTHROPIC_MAX_TOKENS,
        "gen_ai.response.model": RECORDED_MODEL,
    }
    ids = [attrs(chat)["gen_ai.response.id"] for chat in chats]
    assert all(MESSAGE_ID.fullmatch(value) for value in ids) and ids[0] != ids[1]
    assert ids[1] == next(data for _, name, data in events if name == "message")["id"]
    assert [attrs(chat) for chat in chats] == [
        {
            **request,
            "gen_ai.response.id": ids[0],
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 3,
            "gen_ai.response.finish_reasons": ("tool_use",),
        },
        {
            **request,
            "gen_ai.response.id": ids[1],
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 21,
            "gen_ai.response.finish_reasons": ("end_turn",),
        },
    ]
    assert attrs(tool) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "execute_sql",
        "gen_ai.tool.type": "function",
        "silvia.tool.outcome": "ok",
    }
    assert attrs(checkpoint) == {} and attrs(save) == {}
    # Each span sits inside its parent in time: the tool and the writes inside the turn, the turn after the POST.
    assert began(start) <= began(send) < ended(send) <= ended(start) <= began(process)
    assert all(began(process) <= began(span) <= ended(span) <= ended(process) for span in under_process)

    # No user data anywhere in what the spans export; the turn id is there (so the scan reads what it should).
    stored = client.get(f"/api/chat/sessions/{session_id}/").json()["messages"][-1]
    log = ChatLog.objects.get(pk=stored["id"])
    [card_balances] = [s for s in recorded_model.scripts if s["name"] == "card-balances"]
    [sql] = [b["input"]["query"] for b in card_balances["steps"][0]["message"]["content"] if "input" in b]
    secrets = [
        QUESTION,
        log.response,
        json.dumps(log.citations),
        json.dumps(log.inline_citations),
        *(json.dumps(c["target"]) for c in log.inline_citations if "target" in c),
        *(c["cited_text"] for c in log.inline_citations),
        *(c["source"] for c in log.citations),
        sql,
        "current_balance",  # a column of the tool's rows
        str(session_id),
        *demo_user_data(),
    ]
    assert (
        "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK" in secrets and log.inline_citations[0]["target"]["kind"] == "accounts"
    )
    text_ = exported_text(exported)
    assert turn_id in text_
    assert leaked(text_, secrets) == []


def test_a_failed_model_request_and_a_refused_tool_say_their_type_only(
    recorded_model, spans, client_for_maya, settings
):
    overloaded = {"status": 529, "body": {"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}}
    recorded_model.load(
        [
            script(
                step(tool_use("toolu_1", "execute_sql", {"query": "SELECT secret_column FROM nowhere"})),
                overloaded,
            )
        ]
    )
    response = client_for_maya.post(f"/api/chat/sessions/{uuid.uuid4()}/turns/", {"message": QUESTION}, format="json")
    events = parse_sse(b"".join(response.streaming_content))
    assert events[-1][2]["error"]["type"] == "overloaded_error"
    exported = finished(spans, f"process {TASK}")

    [process] = by_name(exported, f"process {TASK}")
    first, second = by_name(exported, f"chat {settings.ANTHROPIC_MODEL}")
    [tool] = by_name(exported, "execute_tool execute_sql")
    # The recorded SQL tool refuses a query it has no rows for (a ToolError, its reason for the model).
    assert (tool.status.status_code, tool.status.description) == (StatusCode.ERROR, None)
    assert (attrs(tool)["error.type"], attrs(tool)["silvia.tool.outcome"]) == ("tool_error", "tool_error")
    # The second step is answered 529 until the SDK's retries (2) run out: the failure's kind, as the error event.
    assert first.status.status_code == StatusCode.UNSET
    assert (second.status.status_code, attrs(second)["error.type"]) == (StatusCode.ERROR, "overloaded_error")
    assert "gen_ai.response.id" not in attrs(second)  # no message came
    assert (process.status.status_code, attrs(process)["error.type"]) == (StatusCode.ERROR, "overloaded_error")
    assert all(not span.events for span in exported)  # no exception recorded, with its message
    text_ = exported_text(exported)
    assert leaked(text_, ["secret_column", "unknown recorded query", "Busy", QUESTION]) == []


def test_a_tool_the_turn_stops_waiting_for_is_an_event_of_the_turn(recorded_model, spans, client_for_maya, settings):
    settings.LIVE_TOOL_TIMEOUT_SECONDS = 0.3
    recorded_model.load([script(step(tool_use("toolu_1", "execute_sql", {"query": "slow"})), step(text("No.")))])
    response = client_for_maya.post(f"/api/chat/sessions/{uuid.uuid4()}/turns/", {"message": QUESTION}, format="json")
    assert parse_sse(b"".join(response.streaming_content))[-1][1] == "done"
    # The recorded tool's "slow" query sleeps 5 s: its span ends then, after the turn's.
    exported = finished(spans, "execute_tool execute_sql", timeout=15)
    [process] = by_name(exported, f"process {TASK}")
    [tool] = by_name(exported, "execute_tool execute_sql")
    assert [(event.name, dict(event.attributes or {})) for event in process.events] == [
        ("tool_timed_out", {"gen_ai.tool.name": "execute_sql"})
    ]
    assert parent_of(tool) == process.context.span_id and ended(tool) > ended(process)
    assert attrs(tool)["silvia.tool.outcome"] == "tool_error"  # "slow" has no rows either


@pytest.fixture
def client_for_maya(maya):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=maya).key}")
    return client
