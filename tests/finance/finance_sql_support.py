"""What the isolation tests of execute_sql share (SPEC 13; docs/sql-tool.md): what exists only in sam's data,
the check that an output holds only maya's rows, and the check that the database session is back as it was."""

from __future__ import annotations

import json

from django.db import connection

from finance.demo_data import MAYA_CLERK, SAM, SAM_CLERK
from tests.finance_data import MAYA_IDS, secrets_of

SAM_SECRETS = secrets_of(SAM, SAM_CLERK)
SAM_BALANCES = {1240.77, 3120.4, 8214.03, 160.0, 4360.6, 2684.7, 1675.9}


def _strings(value, found: list) -> list:
    if isinstance(value, dict):
        for item in value.values():
            _strings(item, found)
    elif isinstance(value, list):
        for item in value:
            _strings(item, found)
    else:
        found.append(value)
    return found


def assert_only_mayas(output: dict) -> None:
    text = json.dumps(output)
    for secret in SAM_SECRETS:
        assert secret not in text
    for value in _strings(output["rows"], []):
        assert not (isinstance(value, float) and value in SAM_BALANCES)
    for row in output["rows"]:
        for column in (
            "source_account_id",
            "account_id",
            "snaptrade_account_id",
            "manual_account_uuid",
            "account_uuid",
        ):
            if row.get(column) is not None:
                assert row[column] in MAYA_IDS
        if row.get("clerk_id") is not None:
            assert row["clerk_id"] == MAYA_CLERK


def assert_session_clean() -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user = session_user, current_setting('transaction_read_only'), "
            "(SELECT count(*) FROM finance_sql_scope), current_setting('statement_timeout')"
        )
        assert cursor.fetchone() == (True, "off", 0, "0")
