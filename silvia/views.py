"""Project-level views."""

from __future__ import annotations

import hmac
import logging

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from silvia.readiness import run_checks

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
    """`GET /healthz`: the process is alive and serving: 200 `{"status": "ok"}`, touching nothing else
    (a database outage is `/readyz`'s to report, not a reason to restart every process)."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    """`GET /readyz`: 200 `{"status": "ok", "checks": {"database": "ok", ...}}` when every part in
    `READINESS_CHECKS` is reachable, else 503 with `"status": "unavailable"` and the parts that are
    not. Needs no login; names no error (each is logged by class only)."""
    checks = run_checks(settings.READINESS_CHECKS)
    ready = all(result == "ok" for result in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)


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
    from chat.metrics import render  # prometheus-client, with the first scrape only

    body, content_type = render()
    return HttpResponse(body, content_type=content_type)
