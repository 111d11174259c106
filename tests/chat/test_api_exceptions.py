"""A database that cannot answer is a JSON 503 with Retry-After under /api/, never a 500 (docs/api.md#errors)."""

from __future__ import annotations

import sqlite3
import uuid

import pytest
from django.db import connection

from chat.api.exceptions import BUSY

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's write lock, held by another connection"),
]


def test_a_database_that_stays_locked_is_a_503_with_retry_after(token_client, settings):
    settings.ANTHROPIC_API_KEY = "test-key"  # the turn endpoint is open
    connection.close()
    connection.settings_dict["OPTIONS"]["timeout"] = 0.2  # seconds SQLite waits for its write lock
    other = sqlite3.connect(connection.settings_dict["NAME"], timeout=5)
    try:
        other.execute("BEGIN IMMEDIATE")  # a writer holding the lock: the admission's write cannot start
        response = token_client.post(f"/api/chat/sessions/{uuid.uuid4()}/turns/", {"message": "hi"}, format="json")
    finally:
        other.rollback()
        other.close()
        connection.close()
        connection.settings_dict["OPTIONS"]["timeout"] = 20
    assert (response.status_code, response["Content-Type"], response["Retry-After"]) == (503, "application/json", "5")
    assert response.json() == {"detail": BUSY}
