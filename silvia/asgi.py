"""ASGI entry point: `uvicorn silvia.asgi:application`, the Procfile's `stream:` process and `make run`'s
one server (docs/deploying.md#processes-the-procfile).

`application` is Django's stock ASGI handler (`get_asgi_application()`),
inside one ASGI middleware of ours, `BodyLimit`: the live turns' POST is
the one body this process reads, and Django's handler reads any body to
its end before a view sees it (spooling it to disk), however long a client
keeps sending. `BodyLimit` stops at `DATA_UPLOAD_MAX_MEMORY_SIZE` instead:
a declared `Content-Length` past it, or a body that grows past it while it
arrives, is a JSON 413 at once (docs/api.md#errors). It wraps the handler
from outside, through the ASGI interface only.
"""

from __future__ import annotations

import json
import os
from typing import Any

from django.core.asgi import get_asgi_application

__all__ = ["BodyLimit", "application"]

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "silvia.settings")
django_application = get_asgi_application()


class BodyLimit:
    """An ASGI middleware answering 413 for a request body past `limit` bytes (None: no limit)."""

    def __init__(self, app: Any, limit: int | None) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.limit is None:
            await self.app(scope, receive, send)
            return
        declared = next((value for name, value in scope["headers"] if name.lower() == b"content-length"), b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        received, refused = 0, False

        async def counted_receive() -> dict[str, Any]:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:  # type: ignore[operator]  # checked above
                    refused = True
                    return {"type": "http.disconnect"}  # Django stops reading and answers nothing
            return message

        await self.app(scope, counted_receive, send)
        if refused:
            await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        body = json.dumps({"detail": f"The request body is larger than {self.limit} bytes."}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": [*headers, (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _limit() -> int | None:
    from django.conf import settings

    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


application = BodyLimit(django_application, _limit())

from live.configured import warn_if_no_model  # noqa: E402  (after Django is set up)
from silvia.celery import app as celery_app  # noqa: E402, F401  (turns are queued through it)

warn_if_no_model()
