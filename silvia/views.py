"""Project-level views."""

from __future__ import annotations

import logging

from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

logger = logging.getLogger(__name__)


def api_not_found(request: HttpRequest, *args: object, **kwargs: object) -> JsonResponse:
    """404 `{"detail": "Not found."}` for an unmatched URL under `/api/`, as DRF answers a missing object."""
    return JsonResponse({"detail": "Not found."}, status=404)


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
