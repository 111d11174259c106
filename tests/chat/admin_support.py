"""What the staff admin's tests share: the changelist's URL, citation and row builders, three account ids
(the signed-in staff are tests/chat/conftest.py)."""

from __future__ import annotations

from pathlib import Path

from chat.models import ChatLog
from tests.factories import ChatLogFactory

REPO = Path(__file__).resolve().parents[2]
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
