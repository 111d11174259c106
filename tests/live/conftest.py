"""The durable-turn tests' fixtures, for every test under tests/live/ (a module's own `token` wins): maya's
API token, and the Procfile's processes on the embedded broker, as `make run` starts them."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token

from tests.live.live_durable_support import base_env
from tests.procfile import Stack, embedded_env


@pytest.fixture
def token(maya):
    return Token.objects.create(user=maya).key


@pytest.fixture
def embedded(recorded_model_server, tmp_path):
    """Processes on the embedded broker (kombu's SQLAlchemy transport on a SQLite file), as `make run` starts them."""
    recorded_model_server.load([])
    processes = Stack({**base_env(recorded_model_server), **embedded_env(tmp_path / "broker")}, tmp_path)
    yield processes
    processes.close()
