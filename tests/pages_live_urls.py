"""The project's URLs plus a recorded live-turn endpoint, for the browser tests.

It stands in for docs/live.md's `POST /api/chat/sessions/<id>/turns/` and
`GET /api/chat/turns/<turn_id>/events` where a test needs the stream to drop
at a chosen event (the real endpoint is tested in the browser too): a
recorded turn (examples/turns) is saved through `record_turn` for the caller
and replayed as the SSE events docs/live.md names, built from the saved row, so
what streams is what a reload shows. The POST stream drops after
`DROP_AFTER` events, so the page must reconnect with `Last-Event-ID`.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.urls import path

from chat.services import record_turn
from citations.text import utf16_length
from silvia.urls import urlpatterns as project_urlpatterns

RECORDED_TURN_ID = "5079d460-8953-4dac-a91a-bc2d4c338e80"  # 1.1: two credit cards and checking
DROP_AFTER = 6
EVENTS: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
RECONNECTS: list[str | None] = []


def _recorded_turn() -> dict[str, Any]:
    records = json.loads((Path(settings.BASE_DIR) / "examples/turns/01-card-balances.json").read_text())
    return copy.deepcopy(next(r for r in records if r["id"] == RECORDED_TURN_ID))


def _events_for(log: Any, session_id: str, turn_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    """docs/live.md's events for a saved turn: text in small deltas, each citation once its span is written."""
    events: list[tuple[str, dict[str, Any]]] = [("turn", {"turn_id": turn_id, "session_id": session_id})]
    pending = list(log.inline_citations)
    answer = log.response
    for start in range(0, len(answer), 24):
        events.append(("text", {"text": answer[start : start + 24]}))
        written = utf16_length(answer[: start + 24])
        while pending and pending[0]["end"] <= written:
            events.append(("citation", {"citation": pending.pop(0)}))
    events += [("citation", {"citation": c}) for c in pending]
    events += [
        ("citations_summary", {"citations": log.citations}),
        ("message", {"type": "message", "role": "assistant", "content": [], "stop_reason": "end_turn"}),
        ("done", {"log_id": str(log.id), "session_id": session_id, "skipped_citations": {}, "stop_reason": "end_turn"}),
    ]
    return [(n, name, data) for n, (name, data) in enumerate(events, 1)]


def _sse(events: list[tuple[int, str, dict[str, Any]]]) -> Iterator[bytes]:
    for number, name, data in events:
        time.sleep(0.03)  # so the page visibly streams
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
    last = request.headers.get("Last-Event-ID")
    RECONNECTS.append(last)
    after = int(last) if last else 0
    return StreamingHttpResponse(_sse([e for e in EVENTS[turn_id] if e[0] > after]), content_type="text/event-stream")


urlpatterns = [
    path("api/chat/sessions/<str:session_id>/turns/", start_turn),
    path("api/chat/turns/<str:turn_id>/events", turn_events),
    *project_urlpatterns,
]
