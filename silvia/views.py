"""Project-level views."""

from __future__ import annotations

import logging

from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

logger = logging.getLogger(__name__)


def api_not_found(request: HttpRequest, *args: object, **kwargs: object) -> JsonResponse:
    """404 `{"detail": "Not found."}` for an unmatched URL under `/api/`, as DRF answers a missing object."""
    return JsonResponse({"detail": "Not found."}, status=404)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """`handler400`: under `/api/` a JSON 400 (a body over `DATA_UPLOAD_MAX_MEMORY_SIZE`, a
    suspicious header), as the API's other errors; elsewhere Django's own page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Bad request: the request is too large or malformed."}, status=400)
    return defaults.bad_request(request, exception)  # type: ignore[arg-type]  # Django accepts None here


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """`GET /healthz`: 200 `{"status": "ok"}` when the database answers `SELECT 1`, else 503
    `{"status": "unavailable", "detail": "database unreachable"}`. Needs no login; says
    nothing about the error (it is logged, by class only, for the operator)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        logger.warning("healthz: database unreachable (%s)", type(exc).__name__)
        return JsonResponse({"status": "unavailable", "detail": "database unreachable"}, status=503)
    return JsonResponse({"status": "ok"})
