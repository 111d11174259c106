"""ASGI entry point: `uvicorn silvia.asgi:application` (SSE streams without buffering).

Static files (the admin's, the pages') are served by whitenoise's middleware,
with DEBUG on or off, so no static handler wraps the application here.

`application` is Django's ASGI handler (`SyncChainASGIHandler`) with the
thread hops of a request cut down, the largest part of the fixed cost of an
API answer under load (bench/README.md, "empty list"):

- Django runs every middleware that can be async as async, so each
  `process_request` and `process_response` of our sync middleware hops to a
  worker thread and back: 16 hops a request. Here the middleware chain is
  the sync one, and `request_started`, the chain with its view and, for a
  response that is not streamed, its closing run in one hop. A streamed
  response is closed in a second hop once sent, as Django does, and also
  when sending it failed (its iterator raised), which Django skips: then no
  `request_finished` came and the request thread kept its database
  connection checked out of the pool. Async views
  (the live turn streams) still run on the event loop.
- Django sends a body in 64 KiB messages; here a body, or a streamed
  response's part, is one message (`chunk_bytes`).
- Django gives each request a worker thread of its own (asgiref's
  `ThreadSensitiveContext`), so that all of the request's sync code and its
  database connection stay on one thread; asgiref starts that thread for
  the request and one more to join it afterwards. Here the threads are kept:
  a request takes an idle single-thread executor (or starts one) and gives
  it back when it ends, so a thread still serves one request at a time.

The request body is read as Django reads it, with two differences
(docs/api.md#errors):

- Reading stops once the body is past `DATA_UPLOAD_MAX_MEMORY_SIZE` (at
  once when `Content-Length` says so): Django spools any body to disk
  first, however long the client keeps sending. Any read of that body then
  raises `RequestDataTooBig`, which is the 413 under `/api/` (no view
  takes file uploads, which that limit would not count).
- A body sent without `Content-Length` (`Transfer-Encoding: chunked`) gets
  one, its length as read: DRF takes a request without one for a request
  without a body.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted, RequestDataTooBig
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import FileResponse, HttpRequest, HttpResponseBase
from django.urls import set_script_prefix

_T = TypeVar("_T")

#: Idle request threads kept for the next requests; more are stopped when their request ends.
IDLE_THREADS = 16


class RequestThreads:
    """Single-thread executors, one per request in flight, kept between requests (up to `keep` idle)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._idle: list[ThreadPoolExecutor] = []
        self._lock = threading.Lock()

    def acquire(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")

    def release(self, executor: ThreadPoolExecutor) -> None:
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(executor)
                return
        # Work a cancelled request left queued still runs; the thread then ends.
        executor.shutdown(wait=False)


class RefusedBody(io.RawIOBase):
    """The body of a request past `DATA_UPLOAD_MAX_MEMORY_SIZE`, left unread: reading it raises `RequestDataTooBig`."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size  # the bytes received (or declared) when reading stopped

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.")


def _declared_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class SyncChainASGIHandler(ASGIHandler):
    """Django's `ASGIHandler` (5.2) with one thread hop per request and request threads kept (module docstring)."""

    threads = RequestThreads(IDLE_THREADS)

    def __init__(self) -> None:
        super().__init__()
        # Made once: building asgiref's wrapper (its checks, `update_wrapper`) is per-request work otherwise.
        self._respond_in_thread = sync_to_async(self._respond, thread_sensitive=True)

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self.threads.acquire()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self.threads.release(executor)

    @classmethod
    def chunk_bytes(cls, data: Sequence[_T]) -> Iterator[tuple[Sequence[_T], bool]]:
        """A body, or a streamed response's part, as one ASGI message, not Django's 64 KiB slices.

        Each slice is a copy and, under uvicorn, a pass through its HTTP
        writer: 12 for a 100-turn detail (0.8 MB), 32 for each 2 MB part of a
        streamed one. The data is in memory already, and the server's flow
        control bounds what it buffers either way.
        """
        yield data, True

    @staticmethod
    async def lifespan(receive: Any, send: Any) -> None:
        """The ASGI lifespan protocol, with nothing to start or stop: answered, so that uvicorn does not log that
        the application does not support it (Django's own handler raises, and uvicorn then carries on without)."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def read_body(self, receive: Any, limit: int | None = None) -> Any:
        """Django's `read_body`, stopping past `limit` bytes with a `RefusedBody` (module docstring)."""
        # Closed by the caller (the request), as in Django.
        body_file = tempfile.SpooledTemporaryFile(max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE, mode="w+b")  # noqa: SIM115
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                body_file.close()
                raise RequestAborted()
            chunk = message.get("body", b"")
            size += len(chunk)
            if limit is not None and size > limit:
                body_file.close()
                return RefusedBody(size)
            body_file.write(chunk)
            if not message.get("more_body", False):
                break
        body_file.seek(0)
        return body_file

    async def listen_for_disconnect(self, receive: Any) -> None:
        """Django's, except that the rest of a refused body (`RefusedBody`) is skipped, not an error."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise RequestAborted()
            assert message["type"] == "http.request", f"Invalid ASGI message after request body: {message['type']}"

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django's `ASGIHandler.handle`, with `_respond` (one hop) in place of its three, and the body
        read up to `DATA_UPLOAD_MAX_MEMORY_SIZE` (module docstring)."""
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        declared = _declared_length(scope)
        try:
            if limit is not None and declared is not None and declared > limit:
                body_file: Any = RefusedBody(declared)
            else:
                body_file = await self.read_body(receive, limit)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        request, error_response = self.create_request(scope, body_file)
        if request is not None:
            size = body_file.size if isinstance(body_file, RefusedBody) else body_file.seek(0, os.SEEK_END)
            if size and (declared is None or isinstance(body_file, RefusedBody)):
                request.META["CONTENT_LENGTH"] = str(size)
            if not isinstance(body_file, RefusedBody):
                body_file.seek(0)
        if request is None:
            assert error_response is not None
            await signals.request_started.asend(sender=self.__class__, scope=scope)
            body_file.close()
            await self.send_response(error_response, send)
            await sync_to_async(error_response.close)()
            return

        made: list[tuple[HttpResponseBase, bool]] = []  # (response, closed) once the chain returned it

        async def process_request() -> None:
            made.append(await self._respond_in_thread(scope, request))
            with contextlib.suppress(asyncio.CancelledError):  # the client disconnected during send_response
                await self.send_response(made[0][0], send)

        # As Django: listen for a disconnect while the response is made.
        responding = asyncio.create_task(process_request())
        tasks: list[asyncio.Task[Any]] = [asyncio.create_task(self.listen_for_disconnect(receive)), responding]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                if task.done():
                    with contextlib.suppress(RequestAborted):
                        task.result()
                else:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        finally:
            for task in tasks:  # left running only when the loop above raised
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            # Unlike Django, also when sending failed (a stream raised midway): a response is always closed,
            # so `request_finished` always comes and the request thread's database connection goes back.
            if not made:  # cancelled (or failed) before the chain returned
                await signals.request_finished.asend(sender=self.__class__)
            elif not made[0][1]:
                await sync_to_async(made[0][0].close)()
            body_file.close()

    def _respond(self, scope: dict[str, Any], request: HttpRequest) -> tuple[HttpResponseBase, bool]:
        """In the request's thread: `request_started`, the middleware chain and view, and the closing of a
        response that is not streamed (its body is already made). Returns (response, closed)."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        response = self.get_response(request)
        response._handler_class = self.__class__  # type: ignore[attr-defined]  # as Django's run_get_response
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size
        if response.streaming:
            return response, False
        response.close()
        return response, True

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        # The chain is sync (load_middleware): enter it in the request's thread.
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


os.environ.setdefault("DJANGO_SETTINGS_MODULE", "silvia.settings")
django.setup(set_prefix=False)
application = SyncChainASGIHandler()

from live.configured import warn_if_no_model  # noqa: E402  (after Django is set up)
from silvia.celery import app as celery_app  # noqa: E402, F401  (turns are queued through it)

warn_if_no_model()
