"""What the tests of the admin's database queries share: the Python reference they are checked against
(`classify_citation` over the stored JSON), the database's counts of a row, and rows inserted by hand."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection

from chat.models import ChatLog, ChatSession
from chat.selectors import chat_logs_with_citation_counts
from citations.summary import MALFORMED, UNTYPED, classify_citation
from citations.targets import AccountsTarget, AccountTarget

COLUMNS = (
    "id, session_id, user_id, user_message, response, citations, inline_citations, prompt_version, model, created_at"
)


# -- the Python reference ---------------------------------------------------------


def reference_states(row: Any) -> set[str]:
    """Every `classify_citation` state met in either column."""
    return {classify_citation(entry)[0] for column in row for entry in column}


def reference_counts(citations: list) -> tuple[int, int, int, int]:
    states = [classify_citation(entry)[0] for entry in citations]
    untyped, malformed = states.count(UNTYPED), states.count(MALFORMED)
    return len(states), len(states) - untyped - malformed, untyped, malformed


def reference_account_ids(row: Any) -> set[str]:
    ids: set[str] = set()
    for column in row:
        for entry in column:
            target = classify_citation(entry)[1]
            if isinstance(target, AccountTarget):
                ids.add(target.account_id)
            elif isinstance(target, AccountsTarget):
                ids.update(ref.account_id for ref in target.accounts)
    return ids


def reference_sources(row: Any) -> list[str]:
    return [e["source"] for column in row for e in column if isinstance(e, dict) and isinstance(e.get("source"), str)]


def _db_counts(pk: Any) -> tuple[int, int, int, int]:
    row: Any = chat_logs_with_citation_counts().get(pk=pk)
    return row.citation_total, row.typed_total, row.untyped_total, row.malformed_total


# -- rows written four ways ---------------------------------------------------------


def _raw_insert(
    session: ChatSession, user: AbstractBaseUser, citations: Any, inline: Any, *, text: bool = False
) -> uuid.UUID:
    """INSERT by hand, as another writer would; `text=True` passes the JSON text as given."""
    pk = uuid.uuid4()
    db_pk = ChatLog._meta.pk.get_db_prep_value(pk, connection)
    db_session = ChatSession._meta.pk.get_db_prep_value(session.pk, connection)
    encode = (lambda v: v) if text else json.dumps
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO ai_chat_logs ({COLUMNS}) "
            f"VALUES (%s, %s, %s, 'raw', '', %s{cast}, %s{cast}, 'legacy', '', %s)",
            [db_pk, db_session, user.pk, encode(citations), encode(inline), "2026-11-20 10:00:00"],
        )
    return pk


LEGACY: list[dict[str, Any]] = [
    {"source": "silvia://your-portfolio", "title": "Portfolio", "cited_text": "total"},
    {"source": "silvia://market-data/finnhub/AAPL", "title": "AAPL", "cited_text": "up"},
    {"source": "silvia://your-account/checking", "title": "Checking", "cited_text": "balance"},
    {"source": "silvia://tax-authority/irs/impôt.md", "title": "Impôt", "cited_text": "x", "target": None},
]
