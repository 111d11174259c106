"""Whether a DRF view is being served under ASGI (the stream process) or WSGI (the web process)."""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest
from rest_framework.request import Request

__all__ = ["KeepsHttpRequest"]


class KeepsHttpRequest:
    """A mixin for DRF views that answer differently under ASGI: an async iterator for a streamed body there,
    a sync one under WSGI. DRF's `Request` keeps Django's `HttpRequest` under a private name; the view keeps
    it itself from `initialize_request`, a dispatch hook DRF documents ("Dispatch methods")."""

    http_request: HttpRequest

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        self.http_request = request
        return super().initialize_request(request, *args, **kwargs)  # type: ignore[misc]  # APIView's, after us

    @property
    def served_async(self) -> bool:
        """Whether this request came through Django's ASGI handler."""
        return isinstance(self.http_request, ASGIRequest)
