"""The AI SDK stream's protocol end to end (issue 31), against the Procfile's `stream:` and `worker:` processes
on the test database and the recorded model: the POST answers the protocol's headers and framing, and
`?protocol=bogus` is a JSON 400 naming `protocol` on both endpoints; examples/ai-sdk/ask.mjs asks and
replays a live turn; the OpenAPI schema names the parameter on both endpoints.

Needs node and `npm ci`: skipped without them, failed under CI.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from citations.ai_sdk import PROTOCOL
from live.models import LiveTurn
from tests.ai_sdk_support import ROOT, need_node
from tests.live import ai_sdk_live_support
from tests.live.ai_sdk_live_support import RECORDED, check_headers, fetch, frames, logged, stored_row
from tests.live_support import script, step, text

#: The Procfile's processes (once a module) and maya's token: fixtures of tests/live/ai_sdk_live_support.py, bound
#: here, as a plugin's `token` would meet tests/live/conftest.py's.
stream = ai_sdk_live_support.stream
token = ai_sdk_live_support.token

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_post_answers_the_protocols_headers_and_an_unknown_protocol_is_a_json_400(
    stream, recorded_model_server, token
):
    recorded_model_server.load([script(step(text("Hi there.")))])
    session_id = str(uuid.uuid4())
    path = f"/api/chat/sessions/{session_id}/turns/"

    status, headers, body = fetch(stream, "POST", f"{path}?protocol=ai-sdk", token, {"message": "Hello?"})
    assert status == 200
    check_headers(headers)
    turn = LiveTurn.objects.get(session_id=session_id)
    [done] = logged(str(turn.id), "done")
    sent = frames(body)
    assert sent[-1] == "[DONE]"
    assert [json.loads(data) for data in sent[:-1]] == [
        {
            "type": "start",
            "messageId": str(turn.id),
            "messageMetadata": {"turn_id": str(turn.id), "session_id": session_id},
        },
        {"type": "start-step"},
        {"type": "text-start", "id": "text-2"},
        {"type": "text-delta", "id": "text-2", "delta": stored_row(stream, token, session_id)["response"]},
        {"type": "text-end", "id": "text-2"},
        {"type": "finish-step"},
        {"type": "data-citations_summary", "data": []},
        {"type": "finish", "finishReason": "stop", "messageMetadata": done},
    ]

    for protocol in ("bogus", "", "AI-SDK"):
        for method, url, payload in (
            ("POST", f"{path}?protocol={protocol}", {"message": "Hello again?"}),
            ("GET", f"/api/chat/turns/{turn.id}/events?protocol={protocol}", None),
        ):
            status, headers, body = fetch(stream, method, url, token, payload, Accept="text/event-stream")
            assert (status, headers["content-type"]) == (400, "application/json"), (method, protocol, body)
            assert list(json.loads(body)) == ["protocol"], body
            assert "'ai-sdk'" in json.loads(body)["protocol"][0]
    # No turn was started by a refused POST.
    assert LiveTurn.objects.filter(session_id=session_id).count() == 1


def test_the_example_asks_and_replays_a_live_turn(stream, recorded_model_server, token):
    """examples/ai-sdk/ask.mjs against the real endpoints: its POST, then its reconnect (SILVIA_TURN)."""
    recorded_model_server.load(RECORDED)
    session_id = str(uuid.uuid4())
    env = {"PATH": "/usr/bin:/bin", "SILVIA_URL": stream.base_url, "SILVIA_TOKEN": token, "SILVIA_SESSION": session_id}

    def run(**extra: str) -> tuple[int, str, str]:
        done = subprocess.run(
            [need_node(), str(ROOT / "examples" / "ai-sdk" / "ask.mjs"), "How much do I owe on my cards?"],
            capture_output=True,
            timeout=120,
            cwd=ROOT,
            env={**env, **extra},
            check=False,
        )
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    asked = run()
    row = stored_row(stream, token, session_id)
    # Each citation's chip right after the text it cites (examples/ai-sdk/chips.mjs); the answer is ASCII, so
    # its UTF-16 offsets are str indices.
    assert row["response"].isascii() and row["inline_citations"]
    printed, at = "", 0
    for citation in row["inline_citations"]:
        assert citation["target"]["kind"] == "accounts"
        printed += row["response"][at : citation["end"]] + f" [{len(citation['target']['accounts'])} accounts]"
        at = citation["end"]
    assert asked == (0, printed + row["response"][at:] + "\n", "")
    assert run(SILVIA_TURN=row["id"]) == asked


def test_the_schema_names_the_protocol_parameter_on_both_endpoints(db):
    """/api/schema/ describes `?protocol=` (its one value) where the views read it."""
    from rest_framework.test import APIClient

    schema = json.loads(APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content)
    for path, method in (
        ("/api/chat/sessions/{session_id}/turns/", "post"),
        ("/api/chat/turns/{turn_id}/events/", "get"),
    ):
        [protocol] = [p for p in schema["paths"][path][method]["parameters"] if p["name"] == "protocol"]
        assert (protocol["in"], protocol.get("required", False), protocol["schema"]["enum"]) == (
            "query",
            False,
            [PROTOCOL],
        )
        assert "protocol" in schema["paths"][path][method]["responses"]["400"]["description"]
