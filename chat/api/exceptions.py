"""DRF's exception handler, with a database that cannot answer as a 503 (docs/api.md#errors).

A burst of requests can wait for a pooled connection longer than
`DATABASE_POOL_TIMEOUT`, and a database can be down for a moment: Django
raises `OperationalError` for both, which DRF lets through as a 500. Here it
is `503 {"detail": ...}` with `Retry-After`, so a client retries, and a log
line names the error's class (never its text, which can quote values).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import OperationalError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

__all__ = ["BUSY", "exception_handler"]

logger = logging.getLogger(__name__)

BUSY = "The service is busy. Please try again shortly."


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's answer to `exc`; a 503 JSON with `Retry-After` for a database that does not answer."""
    if isinstance(exc, OperationalError):
        logger.warning("a request found the database unavailable (%s)", type(exc.__cause__ or exc).__name__)
        headers = {"Retry-After": str(settings.LIVE_TURN_RETRY_AFTER_SECONDS)}
        return Response({"detail": BUSY}, status=503, headers=headers)
    return drf_exception_handler(exc, context)
