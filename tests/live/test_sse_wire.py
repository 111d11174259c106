"""The SSE wire format read by line-splitting clients (docs/live.md#the-wire-format).

A real uvicorn process, the real SDK against the recorded model; the clients
split lines as Python's `str.splitlines()` and httpx's `iter_lines` do, which
both end a line at U+2028, U+2029 and U+0085.
"""

from __future__ import annotations

import http.client
import json
import uuid
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from rest_framework.authtoken.models import Token

from chat.models import ChatLog
from tests.live_support import ServerProcess, cite, script, step, text, tool_use

pytestmark = pytest.mark.django_db(transaction=True)

ODD = "Line\u2028separator, paragraph\u2029separator, next line\x85and a form feed\x0c."


@pytest.fixture
def server(recorded_model):
    process = ServerProcess(
        {
            "ANTHROPIC_BASE_URL": recorded_model.base_url,
            "ANTHROPIC_API_KEY": "test-key",
            "LIVE_TOOL_FACTORIES": "tests.live_support.recorded_sql_tool",
        }
    )
    yield process
    process.stop()


@pytest.fixture
def token(maya):
    return Token.objects.create(user=maya).key


def events_from_lines(lines: list[str]) -> list[tuple[str, Any]]:
    """An SSE reader over lines already split (the spec's field parsing: `name: value`, one optional space)."""
    events: list[tuple[str, Any]] = []
    fields: dict[str, str] = {}
    for line in [*lines, ""]:
        if not line:
            if "data" in fields:
                events.append((fields.get("event", "message"), json.loads(fields["data"])))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
    return events


def post_raw(server: ServerProcess, token: str) -> bytes:
    url = urlsplit(server.base_url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    conn.request("POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", json.dumps({"message": "odd text"}), headers)
    body = conn.getresponse().read()
    conn.close()
    return body


def odd_script():
    return script(
        step(tool_use("toolu_1", "execute_sql", {"query": "total"})),
        step(text(ODD, cite("silvia://your-portfolio", "total: 6500", "Your\u2028portfolio"))),
    )


def check(events: list[tuple[str, Any]]) -> None:
    names = [name for name, _ in events]
    assert names[0] == "turn" and names[-3:] == ["citations_summary", "message", "done"]
    row = ChatLog.objects.get(pk=events[-1][1]["log_id"])
    assert "".join(data["text"] for name, data in events if name == "text") == row.response == ODD
    assert [data["citation"] for name, data in events if name == "citation"] == row.inline_citations
    assert row.inline_citations[0]["title"] == "Your\u2028portfolio"


def test_a_splitlines_client_reads_every_event(server, token, recorded_model):
    recorded_model.load([odd_script()])
    body = post_raw(server, token)
    for raw in ("\u2028", "\u2029", "\x85"):
        assert raw.encode() not in body  # escaped inside data:
    assert body.startswith(b"retry: 3000\n\n") and body.count(b"retry:") == 1
    check(events_from_lines(body.decode().splitlines()))


def test_httpx_iter_lines_reads_every_event(server, token, recorded_model):
    recorded_model.load([odd_script()])
    headers = {"Authorization": f"Token {token}"}
    url = f"{server.base_url}/api/chat/sessions/{uuid.uuid4()}/turns/"
    with httpx.Client(timeout=30) as client, client.stream("POST", url, json={"message": "odd"}, headers=headers) as r:
        lines = list(r.iter_lines())
    check(events_from_lines(lines))
