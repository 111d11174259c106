"""What the staff admin's tests share: the changelist's URL, citation and row builders, three account ids,
and signed-in staff (fixtures, loaded with `pytest_plugins`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from chat.models import ChatLog
from tests.factories import ChatLogFactory, UserFactory

REPO = Path(__file__).resolve().parents[1]
LIST_URL = "/admin/chat/chatlog/"

ACCOUNT_A = "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U"
ACCOUNT_B = "qozD68xagSpdzNis02f1g3FwR8N8ZJXFRzj2c"
ACCOUNT_C = "ZtLFsthnkAxRzuUr1nu1CQAWtci7Jytl9ooyT"


def change_url(log: ChatLog) -> str:
    return f"{LIST_URL}{log.pk}/change/"


def cite(source: str, target: dict | None = None, *, title: str | None = "t", cited_text: str = "c", **extra) -> dict:
    entry = {"source": source, "title": title, "cited_text": cited_text, **extra}
    if target is not None:
        entry["target"] = target
    return entry


def log_with(citations, inline_citations=None, **kwargs) -> ChatLog:
    """A row whose inline citations default to its citations (spans 0-1)."""
    if inline_citations is None:
        inline_citations = [{**c, "start": 0, "end": 1} if isinstance(c, dict) else c for c in citations]
    return ChatLogFactory.create(citations=citations, inline_citations=inline_citations, **kwargs)


def listed(response) -> set:
    """The primary keys on a changelist page."""
    assert response.status_code == 200, response.status_code
    return {log.pk for log in response.context["cl"].result_list}


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
