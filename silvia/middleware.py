"""Request guards that run before any other middleware or view, and the innermost middleware that keeps the
chain sync under ASGI."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import cast

from asgiref.sync import iscoroutinefunction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.utils.decorators import sync_and_async_middleware

from silvia.views import api_not_found

# C0 controls and DEL. PostgreSQL refuses NUL in text (a database error, so a
# 500, on PostgreSQL only); no other control character belongs in a URL, a
# header or a cookie either. A horizontal tab is legal inside a header value.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_HEADER_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# Checked by their own readers: the token's shape by chat.api.authentication
# (401 "Invalid token."), cookies one by one below.
_HEADERS_READ_ELSEWHERE = {"HTTP_AUTHORIZATION", "HTTP_COOKIE"}


@sync_and_async_middleware
def reject_control_characters(
    get_response: Callable[[HttpRequest], HttpResponse | Awaitable[HttpResponse]],
) -> Callable[[HttpRequest], HttpResponse | Awaitable[HttpResponse]]:
    """Answer bad input a stranger can send before it reaches a query.

    - a control character in the path (`/x%00`): 404, the API's JSON 404 under `/api/`;
    - in the query string (`?q=%00`), a key or a value: 400;
    - in a header value (a raw control byte; a tab is allowed): 400, except
      `Authorization`, whose bad token is DRF's 401 "Invalid token.";
    - in a cookie's name or value (`sessionid="abc\\000def"`, decoded by the
      cookie parser): that cookie is dropped, so the request goes on as if it
      were not sent (anonymous: API 401, admin login page). A browser with a
      corrupt cookie is not locked out.
    A 400 under `/api/` is JSON `{"detail": …}`, as DRF answers. Sync and
    async: the checks do no I/O, so under ASGI they run without a thread hop.
    """
    if iscoroutinefunction(get_response):
        get_async = cast(Callable[[HttpRequest], Awaitable[HttpResponse]], get_response)

        async def async_middleware(request: HttpRequest) -> HttpResponse:
            refusal = refuse_control_characters(request)
            return refusal if refusal is not None else await get_async(request)

        return async_middleware
    get_sync = cast(Callable[[HttpRequest], HttpResponse], get_response)

    def middleware(request: HttpRequest) -> HttpResponse:
        refusal = refuse_control_characters(request)
        return refusal if refusal is not None else get_sync(request)

    return middleware


def refuse_control_characters(request: HttpRequest) -> HttpResponse | None:
    """The response refusing `request` (see `reject_control_characters`), or None to go on.

    Drops cookies holding a control character from `request.COOKIES` in place.
    Raises Http404 for a control character in a path outside `/api/`.
    """
    if _CONTROL.search(request.path):
        if request.path.startswith("/api/"):
            return api_not_found(request)
        raise Http404("No such page.")
    if any(_CONTROL.search(key) or _CONTROL.search(value) for key, values in request.GET.lists() for value in values):
        return _bad_request(request, "The query string holds a control character.")
    bad_header = next(
        (
            name
            for name, value in request.META.items()
            if name.startswith("HTTP_")
            and name not in _HEADERS_READ_ELSEWHERE
            and isinstance(value, str)
            and _HEADER_CONTROL.search(value)
        ),
        None,
    )
    if bad_header is not None:
        header = bad_header.removeprefix("HTTP_").replace("_", "-").title()
        return _bad_request(request, f"The {header} header holds a control character.")
    if any(_CONTROL.search(key) or _CONTROL.search(value) for key, value in request.COOKIES.items()):
        request.COOKIES = {
            key: value for key, value in request.COOKIES.items() if not (_CONTROL.search(key) or _CONTROL.search(value))
        }
    return None


def _bad_request(request: HttpRequest, message: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=400)
    return HttpResponseBadRequest(message)


def sync_chain(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """The innermost middleware, sync only (`async_capable = False`): under ASGI Django then runs the whole
    middleware chain as the sync one, in one thread hop, instead of hopping to a thread and back for each
    `process_request` and `process_response` of every middleware (Django's docs, "Asynchronous support" of
    middleware: a sync middleware makes Django adapt the chain). Every view of ours is sync (DRF's, Django's
    admin and auth), so an async chain buys nothing; the streams' async bodies still run on the event loop.
    Under WSGI (gunicorn) it changes nothing. It does nothing itself."""
    return get_response


sync_chain.sync_capable = True  # type: ignore[attr-defined]  # Django reads these flags off the factory
sync_chain.async_capable = False  # type: ignore[attr-defined]
