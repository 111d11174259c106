"""What `/readyz` checks (docs/deploying.md#health-and-readiness): the one place a readiness check plugs in.

A check is a callable taking nothing that returns None when its part is
reachable and raises (any exception) when it is not. `READINESS_CHECKS` in
settings lists them by dotted path, each under the name `/readyz` reports;
the job engine's broker check goes there beside the database's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from django.db import connection
from django.utils.module_loading import import_string

__all__ = ["database", "run_checks"]

logger = logging.getLogger(__name__)


def database() -> None:
    """The default database answers `SELECT 1`."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


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
