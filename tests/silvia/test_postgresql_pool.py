"""The database pool (docs/deploying.md#database-connections): Django's own psycopg-pool pool, each connection
checked by the backend when a request takes it, so a connection the server closed is replaced, not handed to a
request."""

from __future__ import annotations

import os

import psycopg
import pytest
from django.conf import settings
from django.db import connection

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only"),
    pytest.mark.django_db(transaction=True),
]


def _terminate(pid: int) -> None:
    db = settings.DATABASES["default"]
    conninfo = psycopg.conninfo.make_conninfo(
        dbname="postgres", user=db["USER"], host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432
    )
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        # pg_terminate_backend only signals: wait until the backend is gone.
        admin.execute(
            "DO $$ BEGIN FOR i IN 1..500 LOOP EXIT WHEN NOT EXISTS "
            f"(SELECT 1 FROM pg_stat_activity WHERE pid = {int(pid)}); PERFORM pg_sleep(0.01); END LOOP; END $$"
        )


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def test_the_settings_use_djangos_pool_with_its_check():
    assert settings.DATABASES["default"]["ENGINE"] == "silvia.postgresql"  # Django's, with a start-up probe
    # The backend checks pooled connections itself (tests/silvia/test_postgresql_restart.py says why).
    assert settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] is False
    # DATABASE_POOL_MAX_SIZE's default (docs/configuration.md), unless the run sets it.
    pool = connection.pool  # type: ignore[attr-defined]  # the PostgreSQL backend's, not in the stubs
    assert pool.max_size == int(os.environ.get("DATABASE_POOL_MAX_SIZE", "10"))


def test_a_connection_the_server_closed_is_replaced_not_an_error():
    first = _backend_pid()
    connection.close()  # back to the pool, as at the end of a request
    _terminate(first)
    # The next request's checkout: the pool's check finds the connection dead and hands out another one.
    assert _backend_pid() != first
