"""What the end-to-end tests of the AI SDK stream share (issue 31): the recorded scripts, the Procfile's
`stream:` and `worker:` processes on the test database and the embedded broker, and maya's token with the
demo's accounts (fixtures each module binds: a plugin's `token` would meet tests/live/conftest.py's),
a request read to its end, the stored row and the log, the stream's frames and headers."""

from __future__ import annotations

import http.client
import json
import uuid
from typing import Any

import pytest
from rest_framework.authtoken.models import Token

from citations.ai_sdk import HEADERS
from devtools.recorded_model import load_scripts
from finance.demo import seed_demo_finance
from live.models import LiveTurnEvent
from tests.ai_sdk_support import ROOT, need_node
from tests.factories import UserFactory
from tests.live_support import database_url
from tests.procfile import ProcfileProcess, Stack, embedded_env

RECORDED = load_scripts(ROOT / "examples" / "recorded")


@pytest.fixture(scope="module")
def stream(recorded_model_server, tmp_path_factory):
    """The Procfile's `stream` and `worker` processes on the test database and the embedded broker, for the
    module (each test's rows are its own: the processes keep no state of theirs)."""
    need_node()  # skip (or fail under CI) before starting anything
    folder = tmp_path_factory.mktemp("ai-sdk-live")
    env = {
        "DATABASE_URL": database_url(),
        "ANTHROPIC_BASE_URL": recorded_model_server.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_MAX_RETRIES": "0",  # a 529 fails the turn at once
        "LIVE_TURN_POLL_SECONDS": "0.05",
        **embedded_env(folder / "broker"),
    }
    stack = Stack(env, folder)
    try:
        process = stack.stream()
        stack.worker()
        yield process
    finally:
        stack.close()


@pytest.fixture
def token(maya) -> str:
    """maya's API token, with the demo's accounts (finance/demo_data.py) for her and sam."""
    seed_demo_finance(maya=maya, sam=UserFactory.create(username="sam"))
    return Token.objects.create(user=maya).key


def fetch(process: ProcfileProcess, method: str, path: str, token: str, body: Any = None, **headers: str):
    """`(status, headers (lower-case names), body bytes)` of one request to `process`, read to its end."""
    conn = http.client.HTTPConnection("127.0.0.1", process.port, timeout=60)
    payload = None if body is None else json.dumps(body).encode()
    all_headers = {"Authorization": f"Token {token}", **headers}
    if payload is not None:
        all_headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=payload, headers=all_headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def stored_row(process: ProcfileProcess, token: str, session_id: str) -> dict[str, Any]:
    """The session's last message, as `GET /api/chat/sessions/<id>/` returns it."""
    status, _, body = fetch(process, "GET", f"/api/chat/sessions/{session_id}/", token)
    assert status == 200, body
    return json.loads(body)["messages"][-1]


def logged(turn_id: str, name: str) -> list[dict[str, Any]]:
    """The data of the turn's `name` events, as its log stores them."""
    rows = (
        LiveTurnEvent.objects.filter(turn_id=uuid.UUID(turn_id), event=name)
        .order_by("seq")
        .values_list("data", flat=True)
    )
    return [json.loads(data) for data in rows]


def frames(body: bytes) -> list[str]:
    """The `data:` values of an AI SDK stream, in order; fails on any other line (no id:, event:, retry:)."""
    out = []
    for frame in body.decode().split("\n\n")[:-1]:
        lines = [line for line in frame.split("\n") if not line.startswith(":")]  # keep-alive comments
        if lines:
            [line] = lines
            assert line.startswith("data: "), frame
            out.append(line.removeprefix("data: "))
    assert body.endswith(b"\n\n")
    return out


def check_headers(headers: dict[str, str]) -> None:
    """The headers the protocol requires, and ours: exactly `citations.ai_sdk.HEADERS`."""
    assert headers["content-type"] == "text/event-stream"
    assert headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert headers["cache-control"] == "no-cache"
    assert headers["x-accel-buffering"] == "no"
    assert {k.lower(): v for k, v in HEADERS.items()}.items() <= headers.items()
