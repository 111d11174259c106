"""The staff admin's fixtures, for every test under tests/chat/: a superuser,
a client signed in as them, and one signed in as staff who may only view."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from tests.factories import UserFactory


@pytest.fixture
def staff(db):
    """A superuser, as `make run` creates (admin/admin)."""
    return UserFactory.create(username="admin", is_staff=True, is_superuser=True)


@pytest.fixture
def staff_client(staff) -> Client:
    client = Client()
    client.force_login(staff)
    return client


@pytest.fixture
def viewer_client(db) -> Client:
    """Staff allowed to view logs, not to change them."""
    viewer = UserFactory.create(username="viewer", is_staff=True)
    viewer.user_permissions.add(
        Permission.objects.get(codename="view_chatlog"), Permission.objects.get(codename="view_chatsession")
    )
    client = Client()
    client.force_login(viewer)
    return client
