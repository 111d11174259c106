"""The project's URLs plus a recorded live-turn endpoint, for the browser tests.

It stands in for docs/live.md's `POST /api/chat/sessions/<id>/turns/` and
`GET /api/chat/turns/<turn_id>/events` where a test needs the stream to drop,
rewind or fail at a chosen event (the real endpoint is tested in the browser
too): a recorded turn (examples/turns) is saved through `record_turn` for the
caller and replayed as the SSE events docs/live.md names, built from the saved
row, so what streams is what a reload shows. The POST stream drops after
`DROP_AFTER` events, so the page must reconnect (an EventSource with
`?after=`, then `Last-Event-ID`). `SCENARIO` picks what the reconnect gets:

- `"resume"`: the rest of the events;
- `"rewind"`: the POST first streams a different answer (a resumed turn
  whose model answered differently), the reconnect sends `rewind` back to the
  first text event, then the saved answer (docs/live.md: event ids never
  reused, a client that applies `rewind` ends with exactly the stored row);
- `"error"`: the turn's `error` event;
- `"gone"`: `204`, what the real endpoint answers once a turn has ended.

With `GATED`, `done` waits until the test sets `GATE`, so a test can look at
the streamed answer before the saved one replaces it.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.urls import path

from chat.services import record_turn
from citations.utf16 import utf16_length
from silvia.urls import urlpatterns as project_urlpatterns

RECORDED_TURN_ID = "5079d460-8953-4dac-a91a-bc2d4c338e80"  # 1.1: two credit cards and checking
DROP_AFTER = 6
CHUNK = 24
WRONG = "Nothing is owed on any card this month."  # the first attempt's answer, rolled back
OVERLOADED = "The assistant is overloaded right now. Please try again in a moment."
EVENTS: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
RECONNECTS: list[str | None] = []
SCENARIO = {"name": "resume"}
GATE = threading.Event()
GATED = threading.Event()


def reset(scenario: str, *, gated: bool = False) -> None:
    RECONNECTS.clear()
    SCENARIO["name"] = scenario
    GATE.clear()
    if gated:
        GATED.set()
    else:
        GATED.clear()


def _recorded_turn() -> dict[str, Any]:
    records = json.loads((Path(settings.BASE_DIR) / "examples/turns/01-card-balances.json").read_text())
    return copy.deepcopy(next(r for r in records if r["id"] == RECORDED_TURN_ID))


def _answer_events(log: Any, session_id: str, start: int) -> list[tuple[str, dict[str, Any]]]:
    """The saved answer from `start` on in small deltas, each citation once its span is written, then the end."""
    events: list[tuple[str, dict[str, Any]]] = []
    pending = list(log.inline_citations)
    answer = log.response
    for begin in range(start, len(answer), CHUNK):
        events.append(("text", {"text": answer[begin : begin + CHUNK]}))
        written = utf16_length(answer[: begin + CHUNK])
        while pending and pending[0]["end"] <= written:
            events.append(("citation", {"citation": pending.pop(0)}))
    events += [("citation", {"citation": c}) for c in pending]
    return [
        *events,
        ("citations_summary", {"citations": log.citations}),
        ("message", {"type": "message", "role": "assistant", "content": [], "stop_reason": "end_turn"}),
        ("done", {"log_id": str(log.id), "session_id": session_id, "skipped_citations": {}, "stop_reason": "end_turn"}),
    ]


def _events_for(log: Any, session_id: str, turn_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    """docs/live.md's events for a saved turn, as `SCENARIO` has it."""
    events: list[tuple[str, dict[str, Any]]] = [("turn", {"turn_id": turn_id, "session_id": session_id})]
    if SCENARIO["name"] == "rewind":
        first = log.response[:CHUNK]
        wrong = {"source": "silvia://your-portfolio", "title": "Wrong", "cited_text": "x", "start": CHUNK}
        wrong["end"] = CHUNK + len(WRONG)
        events += [
            ("text", {"text": first}),  # id 2: what both attempts share
            ("text", {"text": WRONG}),
            ("citation", {"citation": wrong}),
            ("text", {"text": " More of the first attempt."}),
            ("text", {"text": " And more."}),  # id 6: the POST drops here
            ("rewind", {"to": 2, "answer": first}),
            *_answer_events(log, session_id, CHUNK),
        ]
    else:
        events += _answer_events(log, session_id, 0)
    return [(n, name, data) for n, (name, data) in enumerate(events, 1)]


def _sse(events: list[tuple[int, str, dict[str, Any]]]) -> Iterator[bytes]:
    yield b"retry: 200\n\n"  # an EventSource that wrongly reconnects does it at once, so a test sees it
    for number, name, data in events:
        time.sleep(0.03)  # so the page visibly streams
        if name == "done" and GATED.is_set():
            GATE.wait(30)
        yield f"id: {number}\nevent: {name}\ndata: {json.dumps(data)}\n\n".encode()


def start_turn(request: HttpRequest, session_id: str) -> HttpResponseBase:
    if not request.user.is_authenticated:
        return JsonResponse({"detail": "Authentication credentials were not provided."}, status=401)
    body = json.loads(request.body)
    record = _recorded_turn()
    record.update(
        id=str(uuid.uuid4()), user_message=body["message"], session={"id": session_id, "title": "Card balances"}
    )
    record.pop("created_at")
    log = record_turn(record, user=request.user)
    turn_id = str(uuid.uuid4())
    EVENTS[turn_id] = _events_for(log, session_id, turn_id)
    return StreamingHttpResponse(_sse(EVENTS[turn_id][:DROP_AFTER]), content_type="text/event-stream")


def turn_events(request: HttpRequest, turn_id: str) -> HttpResponseBase:
    last = request.headers.get("Last-Event-ID") or request.GET.get("after")
    RECONNECTS.append(last)
    if SCENARIO["name"] == "gone":
        return HttpResponse(status=204)
    if SCENARIO["name"] == "error":
        error = (DROP_AFTER + 1, "error", {"error": {"type": "overloaded", "message": OVERLOADED}})
        return StreamingHttpResponse(_sse([error]), content_type="text/event-stream")
    after = int(last) if last else 0
    return StreamingHttpResponse(_sse([e for e in EVENTS[turn_id] if e[0] > after]), content_type="text/event-stream")


urlpatterns = [
    path("api/chat/sessions/<str:session_id>/turns/", start_turn),
    path("api/chat/turns/<str:turn_id>/events", turn_events),
    *project_urlpatterns,
]
