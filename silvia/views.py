"""Project-level views."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import csrf, defaults
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe
from drf_spectacular.views import SpectacularAPIView
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

logger = logging.getLogger(__name__)

# Every error under /api/ is JSON `{"detail": ...}`, as DRF answers
# (docs/api.md#errors): the handlers below cover what Django answers
# itself, before or around DRF's views.


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


@csrf_exempt  # nothing is done, whatever the method: a POST gets the same 404, not the CSRF page
def api_not_found(request: HttpRequest, *args: object, **kwargs: object) -> JsonResponse:
    """404 `{"detail": "Not found."}` for an unmatched URL under `/api/`, any method, as DRF answers a
    missing object."""
    return JsonResponse({"detail": "Not found."}, status=404)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """`handler400`: under `/api/`, a body over `DATA_UPLOAD_MAX_MEMORY_SIZE` is a JSON 413 and any other
    refusal (a suspicious header, too many fields) a JSON 400; elsewhere Django's own page."""
    if _is_api(request):
        if isinstance(exception, RequestDataTooBig):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return JsonResponse({"detail": f"The request body is larger than {limit} bytes."}, status=413)
        return JsonResponse({"detail": "Bad request: the request is too large or malformed."}, status=400)
    return defaults.bad_request(request, exception)  # type: ignore[arg-type]  # Django accepts None here


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """`handler403`: JSON under `/api/`, Django's page elsewhere."""
    if _is_api(request):
        return JsonResponse({"detail": "You do not have permission to perform this action."}, status=403)
    return defaults.permission_denied(request, exception)  # type: ignore[arg-type]


def server_error(request: HttpRequest) -> HttpResponse:
    """`handler500`: `{"detail": "Internal server error."}` under `/api/` (with DEBUG off; DEBUG shows
    Django's technical page), Django's page elsewhere."""
    if _is_api(request):
        return JsonResponse({"detail": "Internal server error."}, status=500)
    return defaults.server_error(request)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """`CSRF_FAILURE_VIEW`: under `/api/` a JSON 403 (DRF's own wording), never the HTML page.

    DRF's views check CSRF themselves, for session-authenticated requests only
    (a token-authenticated POST needs none); this answers any other `/api/`
    view Django's middleware refuses.
    """
    if _is_api(request):
        return JsonResponse({"detail": f"CSRF Failed: {reason}"}, status=403)
    return csrf.csrf_failure(request, reason)


class SchemaView(SpectacularAPIView):
    """`GET /api/schema/`: the OpenAPI document; its errors (a 405) are JSON like the rest of `/api/`."""

    def handle_exception(self, exc: Exception) -> Response:
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)


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
