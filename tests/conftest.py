"""Shared fixtures. The suite runs on SQLite by default and on PostgreSQL when
DATABASE_URL points at one (`.ci/run` does both)."""

from __future__ import annotations

import io
import logging.config
from collections.abc import Iterator

import pytest
from django.conf import settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from silvia.logging_config import build_logging
from tests.factories import UserFactory

# `browser`, `demo` and `page` for the pages' browser tests.
pytest_plugins = ["tests.browser_fixtures"]

_test_databases: list[tuple[str, dict[str, object]]] = []


@pytest.fixture(scope="session", autouse=True)
def _sql_roles_go_with_the_test_database():
    """After the session, drop the SQL tool's roles of the PostgreSQL test database pytest-django dropped
    (roles outlive DROP DATABASE: docs/sql-tool.md#the-roles). Set up before `django_db_setup`, so torn down
    after it. A kept database (`--reuse-db`) keeps its roles."""
    yield
    from finance.libpq import maintenance_connection
    from finance.sql_roles import DatabaseStillExistsError, drop_database_roles

    for name, params in _test_databases:
        try:
            with maintenance_connection(params) as server:
                drop_database_roles(server, name)
        except DatabaseStillExistsError:
            pass


@pytest.fixture(autouse=True)
def _debug_setting_restored():
    """A test that leaves `settings.DEBUG` changed fails (it makes every later 4xx Django's HTML debug page):
    overrides undone out of order, a nested `override_settings` under pytest-django's `settings`, did."""
    from django.conf import settings

    before = settings.DEBUG
    yield
    assert before == settings.DEBUG, "this test left settings.DEBUG changed"


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, noted so its roles can be dropped after it."""
    from django.db import connection

    from finance.libpq import libpq_params

    if connection.vendor == "postgresql":
        _test_databases.append((connection.settings_dict["NAME"], libpq_params(connection.settings_dict)))
    yield


@pytest.fixture
def maya(db):
    """The user the golden turn cases belong to."""
    return UserFactory.create(username="maya")


@pytest.fixture
def other_user(db):
    return UserFactory.create(username="sam")


@pytest.fixture
def token_client(maya):
    """An API client authenticated as maya with a DRF token."""
    client = APIClient()
    token = Token.objects.create(user=maya)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory):
    """A STATIC_ROOT filled by a real `manage.py collectstatic` with the production settings
    (hashed, compressed: whitenoise's CompressedManifestStaticFilesStorage), for uvicorn tests."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = tmp_path_factory.mktemp("static")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "silvia.settings", "DJANGO_STATIC_ROOT": str(root)}
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--no-input", "-v0"],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        check=True,
    )
    return root


@pytest.fixture(scope="session")
def recorded_model_server(django_db_setup, django_db_blocker):
    """The recorded model (`devtools.recorded_model`), one server for the session."""
    from devtools.recorded_model import RecordedModelServer
    from live.wakeups import stop_listener

    server = RecordedModelServer().start()
    yield server
    server.stop()
    # The LISTEN connection would keep the test database from being dropped.
    stop_listener()


@pytest.fixture(scope="session")
def live_worker(django_db_setup, django_db_blocker):
    """A Celery worker for the in-process tests: Celery's own embedded test worker
    (`celery.contrib.testing.worker.start_worker`, a thread of this process running
    the threads pool), on kombu's in-memory transport, running the production task
    `chat.run_live_turn`. Settings overridden in a test reach the turns it runs.
    The Procfile's real processes are tested in tests/live/test_engine.py."""
    import uuid

    from celery.contrib.testing.worker import start_worker

    from silvia.celery import app

    app.conf.update(
        broker_url="memory://",
        broker_transport="memory",
        broker_transport_options={},
        task_default_queue=f"silvia-test-{uuid.uuid4().hex[:12]}",
    )
    with (
        django_db_blocker.unblock(),
        start_worker(
            app, pool="threads", concurrency=4, perform_ping_check=False, loglevel="WARNING", shutdown_timeout=60
        ),
    ):
        yield app


@pytest.fixture
def recorded_model(recorded_model_server, live_worker, settings, transactional_db):
    """The recorded model with no scripts, the SDK pointed at it, turns on committed data,
    a worker running them.

    After the test, waits until no turn is queued or running.
    """
    from tests.live_support import wait_for_turns

    recorded_model_server.load([])
    settings.ANTHROPIC_BASE_URL = recorded_model_server.base_url
    settings.ANTHROPIC_API_KEY = "test-key"
    settings.ANTHROPIC_MAX_RETRIES = 2
    settings.ANTHROPIC_TIMEOUT_SECONDS = 5
    settings.LIVE_TOOL_FACTORIES = ["tests.live_support.recorded_sql_tool"]
    settings.LIVE_TURN_POLL_SECONDS = 0.05
    yield recorded_model_server
    assert wait_for_turns(60), "a turn did not end"


@pytest.fixture
def debug_log() -> Iterator[io.StringIO]:
    """DEBUG on (SQL is logged) and every logger at DEBUG, through the production handlers,
    all writing into the returned buffer."""
    from django.test.utils import override_settings

    buffer = io.StringIO()
    logging.config.dictConfig(build_logging("DEBUG"))
    for name in ("", "django", "django.server", "uvicorn", "uvicorn.access"):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler) and not type(handler).__module__.startswith("_pytest"):
                handler.setStream(buffer)
    with override_settings(DEBUG=True):
        yield buffer
    logging.config.dictConfig(settings.LOGGING)
