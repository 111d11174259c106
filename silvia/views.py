"""Project-level views."""

from __future__ import annotations

import hmac
import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import csrf, defaults
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe
from drf_spectacular.views import SpectacularAPIView
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from silvia.readiness import run_checks

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


@csrf_exempt  # read-only probes: another method gets 405, not the CSRF page
@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """`GET /healthz`: the process is alive and serving: 200 `{"status": "ok"}`, touching nothing else
    (a database outage is `/readyz`'s to report, not a reason to restart every process)."""
    return JsonResponse({"status": "ok"})


@csrf_exempt
@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    """`GET /readyz`: 200 `{"status": "ok", "checks": {"database": "ok", ...}}` when every part in
    `READINESS_CHECKS` is reachable, else 503 with `"status": "unavailable"` and the parts that are
    not. Needs no login; names no error (each is logged by class only)."""
    checks = run_checks(settings.READINESS_CHECKS)
    ready = all(result == "ok" for result in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)


@csrf_exempt
@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """`GET /metrics`: the Prometheus exposition (docs/metrics.md), for `Authorization: Bearer
    <METRICS_TOKEN>` only: 401 without it or with another, 404 when no token is set."""
    token = settings.METRICS_TOKEN
    if not token:
        return HttpResponse(status=404)
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        response = HttpResponse("A bearer token is required.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    from live.collector import LiveTurnsCollector  # prometheus-client, with the first scrape only
    from telemetry.metrics import render

    body, content_type = render(database=[LiveTurnsCollector()])
    return HttpResponse(body, content_type=content_type)
