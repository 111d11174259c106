"""`chat.api.negotiation`: the same renderer and media type as DRF's own negotiation, whatever the request."""

from __future__ import annotations

import pytest
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer, TemplateHTMLRenderer
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.test import APIRequestFactory

from chat.api import negotiation
from chat.api.negotiation import UsualAcceptNegotiation
from chat.api.rendering import EncodedJSONRenderer

RENDERER_LISTS = [
    (EncodedJSONRenderer,),
    (JSONRenderer, BrowsableAPIRenderer),
    (BrowsableAPIRenderer, JSONRenderer),
    (TemplateHTMLRenderer,),
]
ACCEPTS = [None, "*/*", "application/json", "text/html", "application/json; indent=4", "text/plain", "", "image/*"]
QUERIES = ["", "?format=json", "?format=api", "?format=xml"]


def _choice(negotiator, renderer_classes, accept, query):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(APIRequestFactory().get("/api/chat/sessions/" + query, **headers))
    renderers = [renderer() for renderer in renderer_classes]
    try:
        renderer, media_type = negotiator.select_renderer(request, renderers)
    except NotAcceptable:
        return "406"
    except Exception as error:  # DRF's 404 for an unknown `?format=`
        return type(error).__name__
    return renderers.index(renderer), media_type


@pytest.mark.parametrize("renderer_classes", RENDERER_LISTS)
def test_every_answer_is_drfs(renderer_classes, monkeypatch):
    monkeypatch.setattr(negotiation, "_chosen", {})
    ours, drfs = UsualAcceptNegotiation(), DefaultContentNegotiation()
    for _ in range(2):  # the second time from what was kept
        for accept in ACCEPTS:
            for query in QUERIES:
                expected = _choice(drfs, renderer_classes, accept, query)
                assert _choice(ours, renderer_classes, accept, query) == expected, (accept, query)
    # Only the usual headers without `?format=` were kept.
    assert {key[0] for key in negotiation._chosen} <= {None, "*/*", "application/json"}


def test_the_settings_use_it():
    assert api_settings.DEFAULT_CONTENT_NEGOTIATION_CLASS is UsualAcceptNegotiation


def test_the_api_answers_as_before(token_client):
    assert token_client.get("/api/chat/sessions/", HTTP_ACCEPT="text/html").status_code == 406
    indented = token_client.get("/api/chat/sessions/", HTTP_ACCEPT="application/json; indent=2")
    assert indented.content == b'{\n  "count": 0,\n  "next": null,\n  "previous": null,\n  "results": []\n}'
    assert token_client.get("/api/chat/sessions/").content == b'{"count":0,"next":null,"previous":null,"results":[]}'
