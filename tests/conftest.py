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
