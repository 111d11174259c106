"""PostgreSQL's own wall, with the SQL guard bypassed: role, row-level security, the scope row (SPEC 13)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection, transaction

from finance.models import Account
from finance.sql_postgres import reader_role
from finance.view_sql import quote_ident

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only")


def _as_reader(user_ids: list[int], query: str):
    """Run `query` as the reader role with the given scope rows, always rolled back; the rows or the psycopg error."""
    try:
        with transaction.atomic():
            cursor = psycopg.Cursor(connection.connection)
            for user_id in user_ids:
                cursor.execute("INSERT INTO finance_sql_scope (pid, user_id) VALUES (pg_backend_pid(), %s)", [user_id])
            cursor.execute(f"SET LOCAL ROLE {quote_ident(reader_role(connection))}")
            cursor.execute(query)
            rows = cursor.fetchall()
            transaction.set_rollback(True)
            return rows
    except psycopg.Error as error:
        return error


def test_the_views_show_the_scoped_user_only(finance_users):
    maya, sam = finance_users
    connection.ensure_connection()
    assert _as_reader([maya.pk], "SELECT count(*) FROM account_details") == [(11,)]
    assert _as_reader([sam.pk], "SELECT count(*) FROM account_details") == [(5,)]
    assert _as_reader([sam.pk], "SELECT count(*) FROM holding_details") == [(2,)]


def test_no_scope_row_or_two_of_them_show_nothing(finance_users):
    maya, sam = finance_users
    connection.ensure_connection()
    assert _as_reader([], "SELECT count(*) FROM account_details") == [(0,)]
    assert _as_reader([maya.pk, sam.pk], "SELECT count(*) FROM account_details") == [(0,)]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM finance_account",
        "SELECT * FROM finance_sql_scope",
        "INSERT INTO finance_sql_scope VALUES (pg_backend_pid(), 1)",
        "SELECT * FROM auth_user",
        "SELECT * FROM ai_chat_logs",
    ],
)
def test_the_reader_role_reads_only_the_views(finance_users, query):
    maya, _ = finance_users
    connection.ensure_connection()
    assert isinstance(_as_reader([maya.pk], query), psycopg.errors.InsufficientPrivilege)


def test_functions_that_run_sql_still_see_only_the_scope(finance_users):
    # query_to_xml runs SQL of its own; the guard refuses it, and even past the
    # guard the views it reads are filtered.
    maya, _ = finance_users
    connection.ensure_connection()
    rows = _as_reader(
        [maya.pk], "SELECT query_to_xml('select count(*) as n from account_details', false, false, '')::text"
    )
    assert "<n>11</n>" in rows[0][0]


def test_the_app_itself_still_reads_every_row(finance_users):
    assert Account.objects.count() == 16
