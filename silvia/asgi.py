"""ASGI entry point: `uvicorn silvia.asgi:application`, the Procfile's `stream:` process and `make run`'s
one server (docs/deploying.md#processes-the-procfile).

`application` is Django's stock ASGI handler (`get_asgi_application()`),
inside one ASGI middleware of ours, `BodyLimit`, which wraps it from
outside, through the ASGI interface only: the live turns' POST is the one
body this process reads, and Django's handler reads any body to its end
before a view sees it (spooling it to disk), however long a client keeps
sending. `BodyLimit` stops at `DATA_UPLOAD_MAX_MEMORY_SIZE` instead, a
413 at once (docs/api.md#errors). Inside it, `live.slots.GiveBackSlots`
gives back the stream slots a request took when its ASGI call ends: a
client that leaves before its headers never gets a response to close.
"""

from __future__ import annotations

import json
import os
from typing import Any

from django.core.asgi import get_asgi_application

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

    def __init__(self, app: Any, limit: int | None) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = next((value for name, value in scope["headers"] if name.lower() == b"content-length"), None)
        if self.limit is not None and declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, send)
            return
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left before its body ended: nobody to answer
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if self.limit is not None and len(body) > self.limit:
                await self._refuse(scope, send)
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

    async def _refuse(self, scope: dict[str, Any], send: Any) -> None:
        if scope["path"].startswith("/api/"):
            content_type, body = b"application/json", json.dumps({"detail": self._reason()}).encode()
        else:
            content_type, body = b"text/plain; charset=utf-8", self._reason().encode() + b"\n"
        # `Connection: close`: the server closes the connection after the 413 instead of reading and dropping
        # the rest of the body, however long the client keeps sending it (each byte puts off its keep-alive).
        headers = [
            (b"content-type", content_type),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _reason(self) -> str:
        return f"The request body is larger than {self.limit} bytes."


def _limit() -> int | None:
    from django.conf import settings

    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


application = BodyLimit(GiveBackSlots(django_application), _limit())

from live.configured import warn_if_no_model  # noqa: E402  (after Django is set up)
from silvia.celery import app as celery_app  # noqa: E402, F401  (turns are queued through it)

warn_if_no_model()
