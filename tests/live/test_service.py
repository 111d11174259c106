"""Admission under WSGI (`live.service.turn_start`, docs/live.md#admission): a POST that must wait for an admission
slot waits with no pooled connection held, and past `LIVE_TURN_ADMISSION_WAIT_SECONDS` is `AdmissionBusyError`."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from django.conf import settings as django_settings
from django.db import connection

from live import service
from live.models import LiveTurn
from live.service import AdmissionBusyError, turn_start
from tests.factories import UserFactory


@pytest.mark.django_db(transaction=True)
def test_a_post_waiting_for_a_slot_holds_no_pooled_connection_and_is_refused_after_its_wait(settings):
    settings.ANTHROPIC_BASE_URL = "http://127.0.0.1:9"  # configured; no model is called at admission
    settings.LIVE_TURN_ADMISSION_WAIT_SECONDS = 0.3
    user = UserFactory.create(username="maya")
    held = [service._admissions.acquire(blocking=False) for _ in range(django_settings.LIVE_TURN_ADMISSIONS_AT_ONCE)]
    assert all(held)  # every slot taken, as by as many admissions running
    outcome: dict[str, object] = {}

    def post() -> None:
        try:
            list(LiveTurn.objects.filter(user=user))  # authentication's query: this thread holds a connection
            outcome["before"] = connection.connection is not None
            started = time.monotonic()
            try:
                turn_start(user=user, session_id=uuid.uuid4(), message="hi", prompt_version="v5")
            except AdmissionBusyError:
                outcome["refused after"] = time.monotonic() - started
            outcome["after"] = connection.connection is not None
        finally:
            connection.close()

    try:
        thread = threading.Thread(target=post)
        thread.start()
        thread.join(10)
    finally:
        for _ in held:
            service._admissions.release()
    pooled = bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))
    assert outcome["before"] is True
    assert 0.3 <= float(outcome["refused after"]) < 1.0  # type: ignore[arg-type]
    # With the pool (PostgreSQL) the connection went back before the wait; without one it stays (SQLite).
    assert outcome["after"] is (not pooled)
    assert LiveTurn.objects.count() == 0
