"""Benchmark: the `execute_sql` tool's isolated execution against the same SELECT run directly (issue 9).

    .venv/bin/python bench/sql_tool.py                                   # both databases, 10 / 1,000 / 100,000 rows
    .venv/bin/python bench/sql_tool.py --backend sqlite --rows 10 1000 --runs 20

A scratch database (PostgreSQL `<prefix>_sql_<pid>_<n>` on the server of
`--database-url`, its two roles dropped with it (`bench/_scratch.py`); or a temporary SQLite file)
is migrated and loaded with two users, each holding N holdings over 20
accounts, so the scope filter has another user's rows to skip. The query is

    SELECT source, source_account_id, account_name, ticker, quantity, institution_value FROM holding_details

and returns the N rows of the bench user. Taking turns, `--runs` times each:

- **tool**: `ExecuteSqlTool().run(...)` as the bench user: the guard, the
  savepoint, the scope row, the reader role, the read-only transaction and
  the JSON-safe `{"columns", "rows"}` (PostgreSQL); the cached private copy,
  the authorizer and the progress handler (SQLite);
- **tool, cold copy** (SQLite only): the same after the copy cache is
  dropped, so every call rebuilds the user's private copy (a first query, or
  the first after the user's data changed);
- **direct**: the same SELECT over the base tables with `WHERE user_id = …`
  (the view's own SQL) on a raw psycopg / sqlite3 connection as the app,
  values decoded as the tool decodes them (PostgreSQL: `numeric` as float,
  dates and times as text), rows fetched and zipped into the same dicts.

Goal: tool/direct ≤ 1.5 at 1,000 rows and above.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._timing import DEFAULT_SERVER_URL, postgres_server_url, ratio_line, time_alternately  # noqa: E402

GOAL_RATIO = 1.5
ACCOUNTS = 20
QUERY = "SELECT source, source_account_id, account_name, ticker, quantity, institution_value FROM holding_details"
COLUMNS = "source, source_account_id, account_name, ticker, quantity, institution_value"


def _load(rows: int) -> Any:
    """Migrate, then give two users `rows` holdings each; returns the bench user."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from finance.models import Account, Connection, Holding, Security

    call_command("migrate", verbosity=0)
    security = Security.objects.create(
        ticker="VTI", name="Vanguard Total Stock Market ETF", type="etf", exchange="NYSE ARCA"
    )
    users = [get_user_model().objects.create(username=name) for name in ("bench", "other")]
    for n, user in enumerate(users):
        connection = Connection.objects.create(
            user=user, source="plaid", institution_name="Bank", item_id=f"item{n}" * 5
        )
        accounts = Account.objects.bulk_create(
            Account(
                user=user,
                connection=connection,
                source_account_id=f"acct{n}x{k:04d}ABCDEFGHIJKLMNOPQRSTUVW"[:37],
                name=f"Account {k}",
                type="investment",
                current_balance=Decimal("1000.00"),
            )
            for k in range(ACCOUNTS)
        )
        Holding.objects.bulk_create(
            (
                Holding(
                    user=user,
                    account=accounts[i % ACCOUNTS],
                    security=security,
                    quantity=Decimal(i % 97 + 1),
                    institution_value=Decimal(i % 1000) + Decimal("0.25"),
                )
                for i in range(rows)
            ),
            batch_size=5000,
        )
    from django.db import connection as django_connection

    with django_connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # fresh tables have no statistics; production ones do
    return users[0]


def _direct(backend: str, url: str, user_id: int) -> tuple[Any, Any]:
    """(run, close): the same SELECT over the base tables on a raw connection, rows zipped into dicts."""
    from finance.view_sql import view_body

    if backend == "postgres":
        import psycopg
        from psycopg.types.numeric import FloatLoader
        from psycopg.types.string import TextLoader

        from finance.sql_postgres import TEXT_TYPES

        connection: Any = psycopg.connect(url, autocommit=True)
        # Decoded exactly as the tool decodes (finance.sql_postgres): numeric
        # as float, dates and times as PostgreSQL's text.
        connection.adapters.register_loader("numeric", FloatLoader)
        for name in TEXT_TYPES:
            connection.adapters.register_loader(name, TextLoader)
        sql = f"SELECT {COLUMNS} FROM ({view_body('holding_details', user_filter='a.user_id = %s')}) AS q"
    else:
        import sqlite3

        connection = sqlite3.connect(url)
        sql = f"SELECT {COLUMNS} FROM ({view_body('holding_details', user_filter='a.user_id = ?')}) AS q"

    def run() -> list[dict[str, Any]]:
        cursor = connection.execute(sql, [user_id])
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    return run, connection.close


def run_backend(*, backend: str, sizes: list[int], runs: int, server_url: str) -> list[dict[str, Any]]:
    """One scratch database per size; returns the figures of each."""
    from bench._scratch import create_database, database_urls, drop_database
    from bench._scratch import scratch_name as scratch_name_for

    figures = []
    for rows in sizes:
        scratch_name = scratch_dir = None
        if backend == "postgres":
            scratch_name = scratch_name_for("sql")
            create_database(server_url, scratch_name)
            direct_url, django_url = database_urls(server_url, scratch_name)
        else:
            scratch_dir = tempfile.mkdtemp(prefix="silvia_bench_sql_")
            direct_url = os.path.join(scratch_dir, "bench.sqlite3")
            django_url = f"sqlite:///{direct_url}"
        close = None
        try:
            from django.conf import settings
            from django.db import connections

            # The SQLite placeholder's OPTIONS (PRAGMA init_command, ...) are not PostgreSQL's.
            base = dict(settings.DATABASES["default"])
            if backend == "postgres":
                base["OPTIONS"] = {}
            settings.DATABASES["default"] = {**base, **_db_settings(django_url)}
            connections.close_all()
            del connections["default"]
            user = _load(rows)

            from finance import sql_sqlite
            from finance.sql_tool import ExecuteSqlTool

            tool = ExecuteSqlTool(timeout_ms=120_000, max_rows=rows, max_chars=10**9)
            direct, close = _direct(backend, direct_url, user.pk)
            expected = direct()
            got = tool.run({"query": QUERY}, user=user)["rows"]
            assert len(got) == len(expected) == rows, (len(got), len(expected), rows)
            assert {r["source_account_id"] for r in got} == {r["source_account_id"] for r in expected}
            timed = {"tool": lambda tool=tool, user=user: tool.run({"query": QUERY}, user=user), "direct": direct}
            if backend == "sqlite":

                def cold(tool: Any = tool, user: Any = user) -> Any:
                    sql_sqlite.clear_cache()
                    return tool.run({"query": QUERY}, user=user)

                timed["tool, cold copy"] = cold
            figures.append({"backend": backend, "rows": rows, "runs": runs, **time_alternately(timed, runs=runs)})
        finally:
            if close is not None:
                close()
            from django.db import connections

            connections.close_all()
            if scratch_name is not None:
                drop_database(server_url, scratch_name)
            if scratch_dir is not None:
                shutil.rmtree(scratch_dir, ignore_errors=True)
    return figures


def _db_settings(url: str) -> dict[str, Any]:
    import environ

    return environ.Env.db_url_config(url)


def format_figures(f: dict[str, Any]) -> str:
    name = {"postgres": "PostgreSQL", "sqlite": "SQLite"}[f["backend"]]
    lines = [
        f"sql_tool bench, {name}: {f['rows']:,} rows, {f['runs']} rounds",
        f["tool"].line("tool (isolated execution)"),
    ]
    if "tool, cold copy" in f:
        lines.append(f["tool, cold copy"].line("tool, cold copy (private copy rebuilt)"))
    lines.append(f["direct"].line("direct (same SELECT, raw connection)"))
    goal = GOAL_RATIO if f["rows"] >= 1000 else float("inf")
    what = f"execute_sql {name} {f['rows']:,} rows: tool/same-work direct"
    lines.append(ratio_line(f["tool"], f["direct"], goal=goal, what=what))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rows", type=int, nargs="+", default=[10, 1000, 100_000])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--database-url", help=f"PostgreSQL server (default DATABASE_URL when postgres://, else {DEFAULT_SERVER_URL})"
    )
    args = parser.parse_args(argv)
    server_url = postgres_server_url(args.database_url)
    if args.backend == "both":
        status = 0
        for backend in ("sqlite", "postgres"):
            command = [
                sys.executable,
                __file__,
                "--backend",
                backend,
                "--runs",
                str(args.runs),
                "--database-url",
                server_url,
                "--rows",
                *map(str, args.rows),
            ]
            status |= subprocess.call(command, cwd=ROOT)
        return status
    os.environ["DATABASE_URL"] = "sqlite:///var/bench-placeholder.sqlite3"
    from bench._django import use_bench_settings

    use_bench_settings()
    import django

    django.setup()
    for figures in run_backend(backend=args.backend, sizes=args.rows, runs=args.runs, server_url=server_url):
        print(format_figures(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
