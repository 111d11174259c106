"""A turn whose database connections are all closed by the server while it streams (a PostgreSQL restart, a
failover, `pg_terminate_backend`) still ends, stored once, and its clients hold the stored row
(docs/live.md#how-a-stream-wakes, docs/deploying.md#database-connections).

The Procfile's three processes on the test database and RabbitMQ, the recorded model streaming slowly; every
connection of the test database but this test's own is terminated three times while the turn streams: the
stream process's LISTEN connection and pool, the worker's pool, the web's pool. A stream cut by a failed read
is reconnected with `Last-Event-ID`, as an EventSource does.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection

from live.models import LiveTurn, LiveTurnStatus
from tests.live.live_durable_support import base_env, durable_script, needs_rabbitmq, wait_for
from tests.live.test_durable_resume import check_client_equals_row
from tests.live_support import SSEClient, apply_rewind
from tests.pg_admin import admin_connection
from tests.procfile import Stack, rabbitmq_env

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only"),
]


def _terminate_all_but_ours() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        ours = cursor.fetchone()[0]
    with admin_connection() as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> %s",
            [connection.settings_dict["NAME"], ours],
        )


def _read_to_the_end(base_url: str, token: str, turn_id: uuid.UUID, held: list) -> int:
    """Reconnect after the last event held until the stream ends with `done`; how many reconnects it took."""
    reconnects = 0
    while not held or held[-1][1] not in ("done", "error"):
        reconnects += 1
        assert reconnects < 20, held[-3:]
        client = SSEClient(
            base_url, "GET", f"/api/chat/turns/{turn_id}/events", token, headers={"Last-Event-ID": str(held[-1][0])}
        )
        if client.status == 204:
            client.close()
            break
        assert client.status == 200, client.status
        held += client.events()
        client.close()
    return reconnects


def test_a_turn_streamed_through_three_terminations_of_every_connection_ends_as_stored(
    recorded_model_server, token, tmp_path
):
    needs_rabbitmq()
    recorded_model_server.load([durable_script(delay_ms=250)])
    stack = Stack({**base_env(recorded_model_server), **rabbitmq_env()}, tmp_path)
    try:
        stream, web = stack.stream(), stack.web()
        stack.worker()
        post = SSEClient(
            stream.base_url, "POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", token, {"message": "cards?"}
        )
        assert post.status == 200
        held = post.events(limit=1)
        turn_id = uuid.UUID(held[0][2]["turn_id"])
        reading = threading.Thread(target=lambda: held.extend(post.events()))
        reading.start()
        for _ in range(3):
            # Each time the client has read more of the turn: the connections die mid-turn, not before it.
            read = len(held)
            wait_for(lambda read=read: len(held) > read or not reading.is_alive(), what="more of the turn")
            _terminate_all_but_ours()
        reading.join(120)
        post.close()
        _read_to_the_end(stream.base_url, token, turn_id, held)
        wait_for(lambda: LiveTurn.objects.get(pk=turn_id).status != LiveTurnStatus.RUNNING, what="the turn's end")
        turn = LiveTurn.objects.get(pk=turn_id)
        assert turn.status == LiveTurnStatus.DONE, (turn.status, turn.error)
        check_client_equals_row(apply_rewind(held), turn_id)
        replay = SSEClient(web.base_url, "GET", f"/api/chat/turns/{turn_id}/events?after=0", token)
        assert apply_rewind(replay.events()) == apply_rewind(held)
        replay.close()
        logs = stack.logs()
        assert "Internal Server Error" not in logs and '" 500' not in logs, logs[-3000:]
    finally:
        stack.close()
