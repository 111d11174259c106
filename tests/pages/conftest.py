"""The pages' test-client fixture, for every test under tests/pages/: a client
signed in as maya."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def maya_client(maya):
    client = Client()
    client.force_login(maya)
    return client
