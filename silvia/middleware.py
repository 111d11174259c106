"""Request guards that run before any view."""
from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse


class RejectNulInQueryString:
    """400 for a query string holding a NUL character (`%00`).

    Query parameters reach ORM filters directly (the admin's list filters,
    DRF's `?page=`), and PostgreSQL refuses NUL in text: without this guard
    such a request is a database error, a 500, on PostgreSQL only.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if any("\x00" in key or "\x00" in value for key, values in request.GET.lists() for value in values):
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": "The query string holds a NUL character."}, status=400)
            return HttpResponseBadRequest("The query string holds a NUL character.")
        return self.get_response(request)
