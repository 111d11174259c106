"""What the durable-turn tests share (issues 10 and 18; docs/live.md): the two-tool-round script a worker is
killed in, the environment of the Procfile's processes, the views of events and rows two runs are compared
by, and waiting (`needs_rabbitmq` and `wait_for` serve tests/live/test_engine.py too)."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from chat.models import ChatLog
from tests.live_support import SSEClient, cite, database_url, script, step, text, tool_use
from tests.procfile import rabbitmq_available

CARDS = "silvia://your-account/credit-card"
CHASE = "silvia://credit-card-corpus/chase/sapphire-preferred/pricing.md"


def durable_script(delay_ms: float = 0, *, second_answer: bool = False) -> dict:
    """Two tool rounds; the last step streams slowly when `delay_ms` (time to kill a worker).

    `second_answer`: the last step says something else, as a real model asked again does.
    """
    last = (
        step(
            text("Across two cards you owe $1,500.", cite(CARDS, "account_name: Credit card; balance: 1200")),
            text(" Its annual fee: $95 💳.", cite(CHASE, "- Annual fee: $95", "Sapphire Preferred pricing and terms")),
            text(" That is all."),
        )
        if second_answer
        else step(
            text("You owe $1,500 💳 across two cards.", cite(CARDS, "account_name: Credit card; balance: 300")),
            text(" The fee is $95.", cite(CHASE, "- Annual fee: $95", "Sapphire Preferred pricing and terms")),
        )
    )
    return script(
        step(text("Let me look."), tool_use("toolu_1", "execute_sql", {"query": "cards"})),
        step(
            text("Cards: ", cite(CARDS, "account_name: Credit card; balance: 1200", "Credit card")),
            tool_use("toolu_2", "read_credit_card_document", {"path": "chase/sapphire-preferred/pricing.md"}),
        ),
        {**last, "delay_ms": delay_ms},
    )


def needs_rabbitmq() -> None:
    if not rabbitmq_available():
        if os.environ.get("CI"):
            pytest.fail("RabbitMQ (127.0.0.1:5672) is needed: a killed worker's task is redelivered by it")
        pytest.skip("RabbitMQ is not reachable on 127.0.0.1:5672")


def base_env(recorded_model_server) -> dict[str, str]:
    return {
        "DATABASE_URL": database_url(),
        "ANTHROPIC_BASE_URL": recorded_model_server.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "LIVE_TOOL_FACTORIES": "tests.live_support.recorded_sql_tool",
        "LIVE_TURN_POLL_SECONDS": "0.05",
    }


def normalized(events):
    """Events without their ids and the per-turn ids (turn, log and session ids), to compare two runs of one script.

    Consecutive `text` events are joined: a worker merges the text that came
    within one write (docs/live.md#how-a-turn-runs-the-event-log-checkpoints-resume), so where one text event
    ends depends on timing; what the events say, in order, does not.
    """
    out: list[tuple[str, object]] = []
    for _, name, data in events:
        if name in ("turn", "done"):
            data = {k: v for k, v in data.items() if k not in ("turn_id", "session_id", "log_id")}
        if name == "message":
            data = {k: v for k, v in data.items() if k != "id"}
        if name == "text" and out and out[-1][0] == "text":
            data = {"text": out.pop()[1]["text"] + data["text"]}  # type: ignore[index]
        out.append((name, data))
    return out


def stored(log_id):
    row = ChatLog.objects.get(pk=log_id)
    return {"response": row.response, "citations": row.citations, "inline": row.inline_citations, "model": row.model}


def uninterrupted(web, token):
    client = SSEClient(web.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"})
    events = client.events()
    client.close()
    assert events[-1][1] == "done", events[-1]
    return events


def wait_for(condition, timeout: float = 60.0, what: str = "a condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
