"""The pool's connection check (silvia/postgresql/base.py): no round trip for a healthy connection,
and a connection the server closed is replaced, not handed to a request."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from psycopg_pool import ConnectionPool

from silvia.postgresql.base import check_pooled_connection

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only")


def _conninfo() -> str:
    db = settings.DATABASES["default"]
    return psycopg.conninfo.make_conninfo(
        dbname="postgres", user=db["USER"], host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432
    )


def _terminate(pid: int) -> None:
    with psycopg.connect(_conninfo(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


def _wait_readable(conn: psycopg.Connection) -> None:
    import select

    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    assert poller.poll(5000), "the server's goodbye never arrived"


def test_a_healthy_connection_is_checked_without_a_query(monkeypatch):
    queries = []
    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(lambda conn: queries.append(conn)))
    with psycopg.connect(_conninfo(), autocommit=True) as conn:
        conn.execute("SELECT 1")
        check_pooled_connection(conn)
    assert queries == []


def test_a_terminated_connection_fails_the_check():
    with psycopg.connect(_conninfo(), autocommit=True) as conn:
        _terminate(conn.info.backend_pid)
        _wait_readable(conn)
        with pytest.raises(psycopg.OperationalError):
            check_pooled_connection(conn)


def test_the_pool_replaces_a_connection_the_server_closed():
    with ConnectionPool(_conninfo(), min_size=1, max_size=1, check=check_pooled_connection, open=True) as pool:
        with pool.connection() as conn:
            first = conn.info.backend_pid
        _terminate(first)
        # pg_terminate_backend only signals: the server has closed the connection once its goodbye arrives
        # (on a loaded machine, later than the next checkout could come).
        _wait_readable(conn)
        deadline = time.monotonic() + 5
        with pool.connection() as conn:
            # The check saw the server's goodbye and the pool reconnected.
            assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != first
            assert time.monotonic() < deadline


def test_the_settings_use_the_pool_with_this_check():
    assert settings.DATABASES["default"]["ENGINE"] == "silvia.postgresql"
    pool = getattr(connection, "pool", None)
    assert pool is not None and pool._check is check_pooled_connection
