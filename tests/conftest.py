"""Shared fixtures. The suite runs on SQLite by default and on PostgreSQL when
DATABASE_URL points at one (`.ci/run` does both)."""
from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.factories import UserFactory


@pytest.fixture
def maya(db):
    """The user the golden turn cases belong to."""
    return UserFactory(username="maya")


@pytest.fixture
def other_user(db):
    return UserFactory(username="sam")


@pytest.fixture
def token_client(maya):
    """An API client authenticated as maya with a DRF token."""
    client = APIClient()
    token = Token.objects.create(user=maya)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client
