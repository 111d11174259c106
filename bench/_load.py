"""Loading benchmark data fast: migrate with the product's own command, then COPY (PostgreSQL)."""

from __future__ import annotations

import datetime as dt
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterable
from typing import Any

import orjson
import psycopg

from bench._http import ROOT, django_env


def migrate(database_url: str) -> None:
    """`manage.py migrate` on the scratch database, in a child process."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=django_env(database_url),
        check=True,
    )


def vacuum(conninfo: str) -> None:
    """`VACUUM ANALYZE`, as autovacuum leaves a table in production: statistics and a visibility map,
    so index-only scans need no heap fetch (the product and the floor alike)."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def add_user(conn: psycopg.Connection[Any], username: str) -> tuple[int, str]:
    """A user with a DRF token; returns (user id, token key)."""
    now = dt.datetime.now(dt.UTC)
    (user_id,) = conn.execute(
        "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, "
        "is_active, date_joined) "
        "VALUES ('!', false, %s, '', '', '', false, true, %s) RETURNING id",
        [username, now],
    ).fetchone() or (0,)
    key = secrets.token_hex(20)
    conn.execute("INSERT INTO authtoken_token (key, user_id, created) VALUES (%s, %s, %s)", [key, user_id, now])
    return user_id, key


def copy_sessions(
    conn: psycopg.Connection[Any], rows: Iterable[tuple[uuid.UUID, int, str, dt.datetime, dt.datetime]]
) -> None:
    """COPY (id, user_id, title, created_at, updated_at) rows into chat_sessions."""
    with conn.cursor().copy("COPY chat_sessions (id, user_id, title, created_at, updated_at) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


LOG_COLUMNS = (
    "id",
    "session_id",
    "user_id",
    "user_message",
    "response",
    "citations",
    "inline_citations",
    "prompt_version",
    "model",
    "created_at",
)


def copy_logs(conn: psycopg.Connection[Any], rows: Iterable[dict[str, Any]]) -> None:
    """COPY ai_chat_logs rows (dicts of LOG_COLUMNS; JSON columns as Python values)."""
    # The admin's summary columns, and `citations.summary.summarize_citations`
    # that filled them, went in migration 0003: every column left is a LOG_COLUMNS one.
    with conn.cursor().copy(f"COPY ai_chat_logs ({', '.join(LOG_COLUMNS)}) FROM STDIN") as copy:
        for row in rows:
            values = [row[c] for c in LOG_COLUMNS]
            values[5] = orjson.dumps(values[5]).decode()
            values[6] = orjson.dumps(values[6]).decode()
            copy.write_row(values)
