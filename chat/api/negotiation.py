"""DRF's content negotiation, with the answer to the usual `Accept` headers kept (bench/README.md, "empty list").

Parsing `Accept` and matching it against the renderers is the same work on
every request: about a twentieth of an empty list. `UsualAcceptNegotiation`
keeps DRF's answer for a request with no `?format=` whose `Accept` is
missing or one of `USUAL_ACCEPT`, per renderer list; any other request is
negotiated by DRF as it comes. Only those fixed headers are kept, never a
value a client chose (DRF keeps no process-wide cache of client input).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

__all__ = ["USUAL_ACCEPT", "UsualAcceptNegotiation"]

#: What browsers' `fetch`, curl, http.client and the API's clients send (None: no `Accept` header).
USUAL_ACCEPT = frozenset({None, "*/*", "application/json"})

_chosen: dict[tuple[Any, ...], tuple[int, str]] = {}


class UsualAcceptNegotiation(DefaultContentNegotiation):
    """`DefaultContentNegotiation`, with its answer for a `USUAL_ACCEPT` header kept per renderer list."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        accept = request.META.get("HTTP_ACCEPT")  # not `.headers`: it copies every header
        if format_suffix or accept not in USUAL_ACCEPT or self.settings.URL_FORMAT_OVERRIDE in request.query_params:
            return super().select_renderer(request, renderers, format_suffix)
        # What DRF's choice depends on: each renderer's class and media type (and format, for `?format=`).
        renderers = list(renderers)
        key = (accept, *((type(renderer), renderer.media_type) for renderer in renderers))
        chosen = _chosen.get(key)
        if chosen is None:
            renderer, media_type = super().select_renderer(request, renderers, format_suffix)
            chosen = _chosen[key] = (renderers.index(renderer), media_type)
        return renderers[chosen[0]], chosen[1]
