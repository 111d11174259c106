"""Project-level views."""
from __future__ import annotations

from django.http import HttpRequest, JsonResponse


def api_not_found(request: HttpRequest, *args: object, **kwargs: object) -> JsonResponse:
    """404 `{"detail": "Not found."}` for an unmatched URL under `/api/`, as DRF answers a missing object."""
    return JsonResponse({"detail": "Not found."}, status=404)
