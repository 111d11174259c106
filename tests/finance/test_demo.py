"""The demo data and `examples/turns` agree (issue 9): every account the examples' SQL rows name is seeded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection

from citations.accounts import account_ref_from_row
from finance import sql_sqlite
from finance.demo_data import MAYA, SAM
from finance.models import Account, Holding
from finance.sql_tool import VIEW_COLUMNS
from tests.finance_data import MAYA_IDS, SAM_IDS, holdings_of

TURNS = Path(__file__).resolve().parents[2] / "examples" / "turns"


def _sql_calls():
    for path in sorted(TURNS.glob("*.json")):
        for record in json.loads(path.read_text(encoding="utf-8")):
            for event in record["events"]:
                if event["type"] == "tool_call" and event["name"] == "execute_sql":
                    yield pytest.param(
                        record["user"],
                        event["input"]["query"],
                        event["output"]["rows"],
                        id=f"{path.name}:{event['id']}",
                    )


SQL_CALLS = list(_sql_calls())
# The demo seeds accounts and holdings, not transactions: the finance app has no
# `transaction_details` view (docs/decisions.md), so those recorded queries cannot run here.
RUNNABLE_SQL_CALLS = [call for call in SQL_CALLS if "transaction_details" not in call.values[1]]


@pytest.mark.parametrize(("username", "query", "rows"), SQL_CALLS)
def test_every_account_an_example_row_names_is_seeded_for_its_user(finance_users, username, query, rows):
    for row in rows:
        ref = account_ref_from_row(row)
        if ref is None:
            continue
        account = Account.objects.select_related("connection").get(
            user__username=username, source_account_id=ref.account_id
        )
        assert account.source == ref.provider or ref.provider is None
        assert account.name == row["account_name"]


def test_only_the_transaction_queries_are_left_out_of_the_runnable_ones():
    left_out = {call.id for call in SQL_CALLS} - {call.id for call in RUNNABLE_SQL_CALLS}
    assert left_out == {
        "02-roth-ira.json:toolu_017X0W7IBYmfDTLyEoEnqps7",
        "05-sam-budget.json:toolu_014UWOSjDpn5FvSntqN7so83",
    }


@pytest.mark.parametrize(("username", "query", "rows"), RUNNABLE_SQL_CALLS)
def test_example_queries_give_their_recorded_account_rows(finance_users, sql_tool, username, query, rows):
    """Each recorded row that names an account comes back, value for value, when its query runs on the demo data."""
    if connection.vendor == "sqlite" and "ILIKE" in query:
        pytest.skip("SQLite has no ILIKE")
    user = finance_users[0] if username == "maya" else finance_users[1]
    got = sql_tool.run({"query": query}, user=user)["rows"]
    for row in rows:
        if account_ref_from_row(row) is not None:
            assert row in got


def test_the_view_columns_the_tool_describes_are_the_views_columns(finance_users, sql_tool):
    maya, _ = finance_users
    for view, columns in VIEW_COLUMNS.items():
        assert tuple(sql_tool.run({"query": f"SELECT * FROM {view} LIMIT 1"}, user=maya)["columns"]) == columns


def test_setup_demo_refuses_without_debug_and_creates_no_user(db, tmp_path, settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DJANGO_DEBUG=true"):
        call_command("setup_demo", examples=tmp_path, stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert not get_user_model().objects.filter(username__in=["maya", "admin"]).exists()


def test_setup_demo_seeds_both_users_and_runs_again(db, tmp_path, settings):
    settings.DEBUG = True
    sql_sqlite.clear_cache()
    call_command("setup_demo", examples=tmp_path, stdout=open("/dev/null", "w"))  # noqa: SIM115
    call_command("setup_demo", examples=tmp_path, stdout=open("/dev/null", "w"))  # noqa: SIM115
    # Once each, whatever the number of runs: the demo blocks' own accounts and holdings.
    assert set(Account.objects.filter(user__username="maya").values_list("source_account_id", flat=True)) == MAYA_IDS
    assert set(Account.objects.filter(user__username="sam").values_list("source_account_id", flat=True)) == SAM_IDS
    assert Account.objects.count() == len(MAYA_IDS) + len(SAM_IDS)
    assert Holding.objects.filter(user__username="maya").count() == holdings_of(MAYA)
    assert Holding.objects.filter(user__username="sam").count() == holdings_of(SAM)
