"""Project-level error views."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404 for unmatched URLs: DRF's `{"detail": "Not found."}` under `/api/`,
    Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)
