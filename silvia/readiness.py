"""What `/readyz` checks (docs/deploying.md#health-and-readiness): the one place a readiness check plugs in.

A check is a callable taking nothing that returns None when its part is
reachable and raises (any exception) when it is not. `READINESS_CHECKS` in
settings lists them by dotted path, each under the name `/readyz` reports;
the job engine's broker check goes there beside the database's.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from django.conf import settings
from django.db import connection
from django.utils.module_loading import import_string

__all__ = ["database", "job_engine", "run_checks", "sql_tool"]

logger = logging.getLogger(__name__)


def database() -> None:
    """The default database answers `SELECT 1`."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def job_engine() -> None:
    """The job engine's broker takes a connection (RabbitMQ), or the embedded broker's folder
    is writable (docs/job-engine.md). A new connection each time: it says what a worker would meet."""
    url = str(settings.CELERY_BROKER_URL)
    if settings.CELERY_BROKER_EMBEDDED:
        if not os.access(settings.CELERY_BROKER_DIR, os.W_OK | os.X_OK):
            raise PermissionError("the embedded broker's folder is not writable")
        return
    from kombu import Connection  # Celery's messaging library: loaded by the first probe, not at start-up

    with Connection(url, connect_timeout=3) as broker:
        broker.connect()


def sql_tool() -> None:
    """On PostgreSQL, the role the service connects as may switch to the SQL tool's reader role (a runtime role
    not granted it would refuse every `execute_sql` query: docs/deploying.md#the-runtime-role). The reason is
    logged, naming the two roles."""
    if connection.vendor != "postgresql":
        return
    from finance.sql_postgres import reader_membership_problem

    problem = reader_membership_problem(connection)
    if problem is not None:
        logger.warning("readyz: sql_tool: %s", problem)
        raise PermissionError("the database role cannot run the SQL tool's queries")


def run_checks(checks: Mapping[str, str]) -> dict[str, str]:
    """`{name: "ok" | "unavailable"}` for each `{name: dotted path}`. A failure is logged by the
    exception's class only (its text can name hosts or quote values)."""
    results = {}
    for name, path in checks.items():
        check: Callable[[], object] = import_string(path)
        try:
            check()
        except Exception as error:
            logger.warning("readyz: %s unavailable (%s)", name, type(error).__name__)
            results[name] = "unavailable"
        else:
            results[name] = "ok"
    return results
