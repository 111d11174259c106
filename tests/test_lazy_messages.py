"""`silvia.middleware.LazyMessageMiddleware`: no message storage for a request that shows none; messages
added in one request still show on the next (tests/test_admin_actions.py checks that end to end)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.messages.storage.fallback import FallbackStorage
from django.utils.functional import empty

pytestmark = pytest.mark.django_db


def test_an_api_answer_makes_no_message_storage(token_client):
    response = token_client.get("/api/chat/sessions/")
    assert response.status_code == 200
    assert response.wsgi_request._messages._wrapped is empty
    assert "messages" not in response.cookies


def test_a_page_reading_messages_gets_djangos_storage(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw-not-used-9"))
    response = client.get("/admin/")
    assert response.status_code == 200
    assert isinstance(response.wsgi_request._messages._wrapped, FallbackStorage)  # the admin's template read it


def test_the_settings_use_it_in_place_of_djangos():
    assert "silvia.middleware.LazyMessageMiddleware" in settings.MIDDLEWARE
    assert "django.contrib.messages.middleware.MessageMiddleware" not in settings.MIDDLEWARE
