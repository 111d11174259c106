"""`stop()` through the AI SDK (issue 39; docs/live.md#stopping-a-turn): the `ai` package's own
`DefaultChatTransport`, with examples/ai-sdk/stopping.mjs's `fetch`, asks the Procfile's `stream` and `worker`
processes (the recorded model streaming slowly), aborts its request once text has come as `useChat`'s `stop()`
does, and reconnects as `resumeStream()` does: the turn was stopped on the server, the replay ends with the
stop's error part, and nothing was stored.

Needs node and `npm ci`: skipped without them, failed under CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

from chat.models import ChatLog
from live.models import LiveTurn, LiveTurnStatus
from live.stops import STOPPED, STOPPED_MESSAGE
from tests.ai_sdk_support import ROOT, need_node
from tests.live import ai_sdk_live_support
from tests.live_support import script, step, text

stream = ai_sdk_live_support.stream
token = ai_sdk_live_support.token

pytestmark = pytest.mark.django_db(transaction=True)


def test_stop_through_the_ai_sdks_transport_stops_the_turn(stream, recorded_model_server, token):
    long = "Here is a long answer, slowly. " * 30
    recorded_model_server.load([{**script(step(text(long))), "delay_ms": 60}])
    session_id = str(uuid.uuid4())
    env = {**os.environ, "SILVIA_URL": f"http://127.0.0.1:{stream.port}", "SILVIA_TOKEN": token}
    ran = subprocess.run(
        [need_node(), str(ROOT / "tests" / "js" / "stop_turn.mjs"), "Tell me everything"],
        env={**env, "SILVIA_SESSION": session_id},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout.splitlines()[-1])
    turn = LiveTurn.objects.get(session_id=uuid.UUID(session_id))
    assert result["turnId"] == str(turn.id)
    assert result["stopStatus"] == 200  # the fetch told the server
    assert (turn.status, turn.error) == (LiveTurnStatus.FAILED, {"type": STOPPED, "message": STOPPED_MESSAGE})
    assert result["partial"] and long.startswith(result["partial"]) and result["partial"] != long
    # The replay: the text that streamed before the stop, then the stop's error part.
    assert long.startswith(result["replayText"]) and len(result["replayText"]) < len(long)
    assert result["errors"] == [STOPPED_MESSAGE]
    assert result["metadata"]["error"] == {"type": STOPPED, "message": STOPPED_MESSAGE}
    assert not ChatLog.objects.filter(session_id=uuid.UUID(session_id)).exists()
