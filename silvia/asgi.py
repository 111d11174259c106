"""ASGI entry point: `uvicorn silvia.asgi:application`, the Procfile's `stream:` process and `make run`'s
one server (docs/deploying.md#processes-the-procfile).

`application` is Django's stock ASGI handler (`get_asgi_application()`),
inside one ASGI middleware of ours, `BodyLimit`, which wraps it from
outside, through the ASGI interface only: the live turns' POST is the one
body this process reads, and Django's handler reads any body to its end
before a view sees it (spooling it to disk), however long a client keeps
sending. `BodyLimit` stops at `DATA_UPLOAD_MAX_MEMORY_SIZE` instead, a
413 at once (docs/api.md#errors). Inside it, `live.admission.AdmissionGate`
lets `LIVE_TURN_ADMISSIONS_AT_ONCE` turn POSTs into Django at a time and
answers the rest `503` with `Retry-After` after
`LIVE_TURN_ADMISSION_WAIT_SECONDS`, before any takes a pooled connection
(docs/live.md#admission). Inside that, `live.slots.GiveBackSlots` gives back
the stream slots a request took when its ASGI call ends: a client that
leaves before its headers never gets a response to close. Inside that,
`live.direct.DirectOpens` answers the plain case of a stream open without
Django's request (`LIVE_SSE_DIRECT_OPENS`). Innermost,
`live.handoff.StreamHandoff` sends a turn's event stream once Django's
request is over (no thread held by an open stream).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
from typing import Any

from django.core.asgi import get_asgi_application

from live.admission import AdmissionGate, turn_post, warn_if_pool_small
from live.handoff import StreamHandoff
from live.slots import GiveBackSlots

__all__ = ["BodyLimit", "application"]

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "silvia.settings")
django_application = get_asgi_application()


class BodyLimit:
    """An ASGI middleware that reads a request's body before the application sees it, up to `limit` bytes
    (None: no limit): a declared `Content-Length` past it, or a body that grows past it while it arrives,
    is a 413 at once, JSON under `/api/`. A body sent without `Content-Length` (chunked) is given one, its
    length as read: Django's request (and so DRF) takes a request without one for a request without a body.
    """

    #: After a 413, how long and how much of the rest of a body still arriving is read and dropped before
    #: the connection is closed (a lingering close, as nginx's `lingering_time`): a client that sends its
    #: whole body before it reads (Python's http.client, most scripts) then reads the 413 instead of a
    #: connection reset. Past either bound the connection closes, however long the body.
    linger_seconds = 5.0
    linger_bytes = 32 << 20

    def __init__(self, app: Any, limit: int | None) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = next((value for name, value in scope["headers"] if name.lower() == b"content-length"), None)
        if self.limit is not None and declared is not None and declared.isdigit() and int(declared) > self.limit:
            # A client that asked `Expect: 100-continue` has sent none of it: reading would invite it to.
            expects = any(name.lower() == b"expect" for name, _ in scope["headers"])
            await self._refuse(scope, receive, send, linger=not expects)
            return
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left before its body ended: nobody to answer
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if self.limit is not None and len(body) > self.limit:
                await self._refuse(scope, receive, send, linger=more)
                return
        if declared is None and body:
            scope = {**scope, "headers": [*scope["headers"], (b"content-length", str(len(body)).encode())]}
        given = False

        async def replay() -> dict[str, Any]:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()  # then the client's own messages: Django listens for its disconnect

        await self.app(scope, replay, send)

    async def _refuse(self, scope: dict[str, Any], receive: Any, send: Any, *, linger: bool) -> None:
        if scope["path"].startswith("/api/"):
            content_type, body = b"application/json", json.dumps({"detail": self._reason()}).encode()
        else:
            content_type, body = b"text/plain; charset=utf-8", self._reason().encode() + b"\n"
        # `Connection: close`: the connection ends with the 413 instead of being kept alive after the rest of
        # the body, however long that is. The 413's bytes go out at once; the response is completed (and the
        # connection closed) once the body has ended, the client has left, or `linger_seconds` have passed.
        headers = [
            (b"content-type", content_type),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": linger})
        if linger:
            await self._drop_rest(receive)
            await send({"type": "http.response.body", "body": b""})

    async def _drop_rest(self, receive: Any) -> None:
        try:
            async with asyncio.timeout(self.linger_seconds):
                dropped = 0
                while dropped <= self.linger_bytes:
                    message = await receive()
                    if message["type"] == "http.disconnect" or not message.get("more_body", False):
                        return
                    dropped += len(message.get("body", b""))
        except TimeoutError:
            return

    def _reason(self) -> str:
        return f"The request body is larger than {self.limit} bytes."


def _limit() -> int | None:
    from django.conf import settings

    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def _gate(app: Any) -> AdmissionGate:
    from django.conf import settings

    return AdmissionGate(
        app,
        at_once=settings.LIVE_TURN_ADMISSIONS_AT_ONCE,
        wait_seconds=settings.LIVE_TURN_ADMISSION_WAIT_SECONDS,
        retry_after=settings.LIVE_TURN_RETRY_AFTER_SECONDS,
        gated=turn_post,
    )


def _direct(app: Any) -> Any:
    from django.conf import settings

    if not settings.LIVE_SSE_DIRECT_OPENS:
        return app
    from live.direct import DirectOpens
    from silvia.middleware import refuse_control_characters

    return DirectOpens(app, guard=refuse_control_characters)


application = BodyLimit(_gate(GiveBackSlots(_direct(StreamHandoff(django_application)))), _limit())

from live.configured import warn_if_no_model  # noqa: E402  (after Django is set up)
from silvia.celery import app as celery_app  # noqa: E402, F401  (turns are queued through it)

warn_if_no_model()
warn_if_pool_small()

# What the process loaded to start is kept for its life: out of the cyclic collector's full passes
# (docs/deploying.md#the-heap-a-process-starts-with).
gc.freeze()
