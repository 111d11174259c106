"""Bodies a stranger can send to the API: each a JSON 400, never a 500 (docs/api.md, docs/live.md)."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(maya):
    return Client(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=maya).key}")


@pytest.mark.parametrize(
    "body",
    [
        '{"message": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"a": ' * 50_000 + "1" + "}" * 50_000,
    ],
    ids=["deep list", "deep object"],
)
def test_json_nested_past_the_decoder_is_a_400(api, body):
    response = api.post(f"/api/chat/sessions/{uuid.uuid4()}/turns/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"detail": "JSON parse error - nested too deep"}


def test_a_body_over_the_upload_limit_is_a_json_413(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = '{"message": "' + "x" * 2000 + '"}'
    response = api.post(f"/api/chat/sessions/{uuid.uuid4()}/turns/", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json() == {"detail": "The request body is larger than 1000 bytes."}
