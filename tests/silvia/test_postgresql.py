"""The database pool (docs/deploying.md#database-connections): Django's own psycopg-pool pool, each connection
checked by the backend when a request takes it, so a connection the server closed is replaced, not handed to a
request.

Every pooled connection closed by the server (a PostgreSQL restart, a failover, `pg_terminate_backend`)
is replaced at once, not reported as an error (docs/deploying.md#database-connections).

The Procfile's `web:` (gunicorn) and `stream:` (uvicorn) processes on the test database. psycopg-pool checks
a connection when a request takes it, and after a failed check it backs off (1 s, 2 s, 4 s, ...) before
checking the next idle one: with all of a pool's idle connections dead, the first request waited past
`DATABASE_POOL_TIMEOUT` and was a 503, though the database was up again."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from rest_framework.authtoken.models import Token

from tests.live_support import database_url
from tests.pg_admin import admin_connection
from tests.procfile import Stack, embedded_env

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
    # The backend checks pooled connections itself (below says why).
    assert settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] is False
    # DATABASE_POOL_MAX_SIZE's default (docs/configuration.md), unless the run sets it.
    pool = connection.pool  # type: ignore[attr-defined]  # the PostgreSQL backend's, not in the stubs
    assert pool.max_size == int(os.environ.get("DATABASE_POOL_MAX_SIZE", "10"))


def test_a_statement_run_more_than_five_times_on_a_connection_is_prepared_there():
    """docs/deploying.md#prepared-statements: bound on the server, prepared at its sixth run (psycopg prepares
    a statement run more than `prepare_threshold` times); PostgreSQL lists it in the connection's
    `pg_prepared_statements` from then on."""
    from django.db import transaction

    marker = "SELECT %s::integer AS prepared_statement_probe"
    with transaction.atomic(), connection.cursor() as cursor:  # one pooled connection throughout
        counts = []
        for value in range(6):
            cursor.execute(marker, [value])
            assert cursor.fetchone() == (value,)
            cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%_probe%"])
            counts.append(cursor.fetchone()[0])
    assert counts == [0, 0, 0, 0, 0, 1]


def test_prepared_statements_are_off_where_the_operator_says_so():
    code = "from django.conf import settings; o = settings.DATABASES['default']['OPTIONS']; "
    code += "print(o.get('server_side_binding'), o.get('prepare_threshold'))"
    env = {**os.environ, "DATABASE_URL": database_url()}
    run = [sys.executable, "-c", f"import django; django.setup(); {code}"]
    on = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    off = subprocess.run(
        run, env={**env, "DATABASE_PREPARED_STATEMENTS": "false"}, capture_output=True, text=True, check=True
    )
    assert (on.stdout.split(), off.stdout.split()) == (["True", "5"], ["None", "None"])


def test_a_connection_the_server_closed_is_replaced_not_an_error():
    first = _backend_pid()
    connection.close()  # back to the pool, as at the end of a request
    _terminate(first)
    # The next request's checkout: the pool's check finds the connection dead and hands out another one.
    assert _backend_pid() != first


POOL = {"DATABASE_POOL_MIN_SIZE": "6", "DATABASE_POOL_TIMEOUT": "5"}


def _get(port: int, token: str) -> tuple[int, float]:
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/api/chat/sessions/", headers={"Authorization": f"Token {token}"})
    status = conn.getresponse().status
    conn.close()
    return status, time.monotonic() - started


def _terminate_the_servers_connections() -> list[int]:
    """Terminate every backend of the test database but this test's own; their pids."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        ours = cursor.fetchone()[0]
    with admin_connection() as admin:
        rows = admin.execute(
            # The targets first (a WHERE may call pg_terminate_backend before its other conditions).
            "WITH targets AS MATERIALIZED (SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> %s)"
            " SELECT pid FROM targets WHERE pg_terminate_backend(pid)",
            [connection.settings_dict["NAME"], ours],
        ).fetchall()
    return [int(row[0]) for row in rows]


def _gone(pids: list[int], seconds: float = 15) -> bool:
    """Whether every backend of `pids` has left pg_stat_activity within `seconds`."""
    deadline = time.monotonic() + seconds
    with admin_connection() as admin:
        while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]).fetchone() != (0,):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
    return True


def _servers_backends() -> int:
    """The test database's backends (the servers' pools, and this test's own connection)."""
    with admin_connection() as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [connection.settings_dict["NAME"]]
        ).fetchone()
    assert row is not None
    return int(row[0])


def _wait_for_backends(wanted, seconds: float = 15) -> bool:
    """Whether the servers' backends came to a count `wanted` accepts within `seconds`."""
    deadline = time.monotonic() + seconds
    while not wanted(count := _servers_backends()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(wanted(count))


def test_requests_after_every_pooled_connection_was_closed_are_answered_at_once(maya, tmp_path):
    token = Token.objects.create(user=maya).key
    stack = Stack({"DATABASE_URL": database_url(), **embedded_env(tmp_path / "broker"), **POOL}, tmp_path)
    try:
        servers = [stack.web(WEB_CONCURRENCY="1"), stack.stream()]
        with ThreadPoolExecutor(8) as pool:  # each pool at its 6 connections, all idle afterwards
            assert {status for status, _ in pool.map(lambda i: _get(servers[i % 2].port, token), range(16))} == {200}
        assert _wait_for_backends(lambda n: n >= 13), "the two pools did not hold their 12 connections"
        terminated = _terminate_the_servers_connections()
        assert len(terminated) >= 12
        assert _gone(terminated), "terminated backends still listed"
        answers = [_get(server.port, token) for server in servers for _ in range(3)]
        assert [status for status, _ in answers] == [200] * 6, stack.logs()[-3000:]
        assert max(seconds for _, seconds in answers) < 2.5, answers
    finally:
        stack.close()


def test_an_idle_connection_is_checked_only_once_the_server_spoke_on_it():
    """The check's round trip is skipped for a connection the server sent nothing (silvia/postgresql/base.py):
    a terminated backend's `FATAL` and close make its socket readable."""
    from silvia.postgresql.base import _spoke

    db = settings.DATABASES["default"]
    conninfo = psycopg.conninfo.make_conninfo(
        dbname=db["NAME"], user=db["USER"], host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432
    )
    with psycopg.connect(conninfo, autocommit=True) as idle:
        pid = idle.info.backend_pid
        assert _spoke(idle) is False  # nothing arrived: taken as it is
        _terminate(pid)
        deadline = time.monotonic() + 10
        while not _spoke(idle):  # the FATAL and the close arrive a moment after the backend left
            assert time.monotonic() < deadline, "the terminated connection's socket never became readable"
            time.sleep(0.01)
    assert _spoke(idle) is True  # closed: cannot be asked, so it is checked (and replaced)
