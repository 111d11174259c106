"""A bad DATABASE_URL or CELERY_BROKER_URL is one line naming it (without its password) and the cause, within
2 s (issue 28, item 4; docs/deploying.md#start-up-errors).

Real processes (`manage.py migrate`, `celery worker`) against loopback addresses only: a closed port
(127.0.0.1:1) and a database missing from the local server (127.0.0.1:5432, trust auth). The web's own
start is `tests/silvia/test_settings_deploy.py`'s (it serves on and `/readyz` answers 503).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cret-pw"  # in every URL below: it must never be printed
#: The whole process (Python, Django and the check) on a loaded machine; the pool alone waited 10 s.
BOUND_SECONDS = 4.0


def _local_server() -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", 5432)) == 0


def _run(command: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    full_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "silvia.settings", "CELERY_BROKER_URL": "", **env}
    started = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=60)
    return result, time.monotonic() - started


MIGRATE = [sys.executable, "manage.py", "migrate", "--no-input"]
WORKER = [sys.executable, "-m", "celery", "-A", "silvia.celery", "worker", "--without-gossip", "--without-mingle"]
MISSING = f"silvia_missing_{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("command", [MIGRATE, WORKER], ids=["migrate", "worker"])
@pytest.mark.parametrize(
    ("url", "line"),
    [
        (
            f"postgres://app:{SECRET}@127.0.0.1:1/silvia",
            "DatabaseUnavailable: DATABASE_URL postgres://app@127.0.0.1:1/silvia: Connection refused",
        ),
        (
            f"postgres://postgres:{SECRET}@127.0.0.1:5432/{MISSING}",
            f'DatabaseUnavailable: DATABASE_URL postgres://postgres@127.0.0.1:5432/{MISSING}: database "{MISSING}" '
            "does not exist",
        ),
        (
            f"app:{SECRET}@127.0.0.1/silvia",
            "ImproperlyConfigured: DATABASE_URL 'app@127.0.0.1/silvia' has no scheme: expected a URL such as "
            "postgres://user@host:5432/name",
        ),
        (
            f"mysql://app:{SECRET}@127.0.0.1/silvia",
            "ImproperlyConfigured: DATABASE_URL mysql://app@127.0.0.1/silvia: unknown scheme 'mysql' (expected one "
            "of postgres, postgresql, pgsql, psql, sqlite; e.g. postgres://user@host:5432/name)",
        ),
    ],
    ids=["refused port", "missing database", "no scheme", "unknown scheme"],
)
def test_a_bad_database_url_is_one_line_within_the_bound(command, url, line):
    if "5432" in url and not _local_server():
        pytest.skip("needs the PostgreSQL server at 127.0.0.1:5432")
    result, took = _run(command, {"DATABASE_URL": url})
    assert result.returncode == 1
    assert result.stderr.splitlines() == [line]
    assert SECRET not in result.stdout + result.stderr
    assert took < BOUND_SECONDS


@pytest.mark.parametrize(
    ("url", "line"),
    [
        (
            f"amqp://guest:{SECRET}@127.0.0.1:1//",
            "BrokerUnavailable: CELERY_BROKER_URL amqp://guest@127.0.0.1:1//: Connection refused",
        ),
        (
            f"rabbit://guest:{SECRET}@127.0.0.1:5672//",
            "BrokerUnavailable: CELERY_BROKER_URL rabbit://guest@127.0.0.1:5672//: unknown scheme 'rabbit' "
            "(not a kombu transport; e.g. amqp://host:5672/)",
        ),
    ],
    ids=["refused port", "unknown scheme"],
)
def test_a_worker_whose_broker_is_bad_stops_with_one_line(tmp_path, url, line):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "CELERY_BROKER_URL": url}
    result, took = _run(WORKER, env)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [line]
    assert SECRET not in result.stdout + result.stderr
    assert took < BOUND_SECONDS


def test_a_broker_url_without_a_scheme_is_refused_by_the_settings(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "CELERY_BROKER_URL": f"guest:{SECRET}@rabbitmq:5672"}
    result, _ = _run([sys.executable, "manage.py", "check"], env)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "ImproperlyConfigured: CELERY_BROKER_URL 'guest@rabbitmq:5672' has no scheme: expected a URL such as "
        "amqp://user@host:5672/vhost"
    ]
