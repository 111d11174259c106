"""`make bench`: every benchmark with small defaults, about 15 minutes in all.

    .venv/bin/python bench/run_all.py [--database-url postgres://user@host:5432/postgres]

Runs, each in its own process, printing its figures as it goes:

1. `get_session.py` over HTTP: 100, 2,000 and 10,000 messages, memory at 20,000;
2. `list_sessions.py` over HTTP: 10,000 sessions, pages 1 and 150;
3. `import_turns.py`: 10,000 records, and a 20 MB `.json` list against `.jsonl`;
4. `derive.py` at 10,000 and 100,000 rows; `support.py`: the assembler of 600 live turns with and without
   citation support (SPEC 15);
5. `backfill.py --rows 20000` (PostgreSQL only; skipped if the file is absent);
6. `sql_tool.py` at 10, 1,000 and 100,000 rows on SQLite and PostgreSQL (5 rounds);
7. `admin.py --rows 20000` on PostgreSQL and SQLite (the admin's log list);
8. `live_turns.py`: 1 and 20 turns on SQLite (embedded broker), and on PostgreSQL with a worker and a stream
   process killed; `live_streams.py`: 300 open streams on one stream process (PostgreSQL and RabbitMQ);
9. `orm_vs_raw.py`: the raw writes left in the code against the ORM's bulk operations;
10. `startup.py`: `manage.py check` against a bare project, `import_turns` of one record;
11. `sandbox.py --runs 10`: an `execute_python` call in its sandbox vs unconfined, and
    SQLite's guarded `printf` vs its own.

At the end it repeats the lines of issue 24's table, each a median with the
range of its rounds, and drops any scratch database (and its roles) of this
run that a killed benchmark left.

get_session, list_sessions, import_turns, backfill and orm_vs_raw need PostgreSQL.

PostgreSQL is the server of `--database-url` (default: DATABASE_URL when it
is a postgres:// URL, else postgres://postgres@127.0.0.1:5432/postgres); the
benchmarks create and drop their own scratch databases on it. When it does
not answer, the PostgreSQL parts are skipped and the summary says so. The
exit status is 1 when a benchmark failed (a goal missed is not a failure: the
figures say it).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._scratch import DEFAULT_PREFIX, drop_database_roles, sweep  # noqa: E402
from bench._timing import DEFAULT_SERVER_URL, postgres_server_url  # noqa: E402
from bench.get_session import postgres_unreachable  # noqa: E402

#: The lines of issue 24's table, as the benchmarks print them (the summary repeats them).
TABLE_LINES = (
    "detail 100 turns:",
    "detail 2000 turns:",
    "detail 10000 turns:",
    "304:",
    "empty list (the API's fixed cost)",
    "list page 1, beyond the empty list",
    "list page 150, beyond the empty list",
    "import 10k turns vs executemany",
    ".json import peak memory vs .jsonl",
    "execute_sql PostgreSQL 1,000 rows",
    "execute_sql PostgreSQL 100,000 rows",
)
_table: dict[str, str] = {}


def _run(title: str, command: list[str], env: dict[str, str], after: Any = None) -> tuple[str, float, int]:
    """Run one benchmark, echoing its output and keeping its lines of issue 24's table;
    then `after(pid)` when given."""
    print(f"\n== {title}", flush=True)
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, *command], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert process.stdout is not None
    for line in process.stdout:
        print(line, end="", flush=True)
        stripped = line.strip()
        for key in TABLE_LINES:
            if stripped.startswith(key):
                _table[key] = stripped
    status = process.wait()
    if after is not None:
        after(process.pid)
    elapsed = time.perf_counter() - started
    if status:
        print(f"   exit status {status}", flush=True)
    return title, elapsed, status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", help=f"PostgreSQL server (default DATABASE_URL when postgres://, else {DEFAULT_SERVER_URL})"
    )
    args = parser.parse_args(argv)
    server_url = postgres_server_url(args.database_url)
    reason = postgres_unreachable(server_url)
    notes = []
    if reason is not None:
        notes.append(f"PostgreSQL at {server_url} did not answer ({reason}): its figures were skipped")
    # Every scratch database of this run starts with this prefix, so that
    # what a killed benchmark left (databases and their roles) is dropped below.
    run_prefix = f"{os.environ.get('BENCH_DB_PREFIX') or DEFAULT_PREFIX}_{os.getpid()}"
    env = {**os.environ, "BENCH_DB_PREFIX": run_prefix}

    def _run_here(title: str, command: list[str], after: Any = None) -> tuple[str, float, int]:
        return _run(title, command, env, after)

    started = time.perf_counter()
    results = []
    if reason is None:
        results += [
            _run_here(
                "get_session: GET /api/chat/sessions/<id> over HTTP (gunicorn, web:) vs the same-work floor",
                [
                    "bench/get_session.py",
                    "--messages",
                    "100",
                    "2000",
                    "10000",
                    "--memory-messages",
                    "20000",
                    "--runs",
                    "10",
                    "--database-url",
                    server_url,
                ],
            ),
            _run_here(
                "list_sessions: GET /api/chat/sessions/ over HTTP, 10,000 sessions, pages 1 and 150, vs cheap SQL",
                ["bench/list_sessions.py", "--runs", "20", "--database-url", server_url],
            ),
            _run_here(
                "import_turns: 10,000 records vs executemany of the same rows; a 20 MB .json list vs .jsonl",
                ["bench/import_turns.py", "--records", "10000", "--json-mb", "20", "--database-url", server_url],
            ),
        ]
    else:
        notes.append("get_session, list_sessions and import_turns need PostgreSQL: skipped")
    results.append(
        _run_here(
            "derive: to_citable_content vs reading label + id columns", ["bench/derive.py", "--rows", "10000", "100000"]
        )
    )
    results.append(
        _run_here("support: a live turn's assembler with and without citation support", ["bench/support.py"])
    )
    if not (BENCH / "backfill.py").is_file():
        notes.append("bench/backfill.py not found: backfill skipped")
    elif reason is not None:
        notes.append("backfill needs PostgreSQL: skipped")
    else:
        results.append(
            _run_here(
                "backfill: backfill_citation_targets vs raw psycopg",
                ["bench/backfill.py", "--rows", "20000", "--database-url", server_url],
            )
        )

    if (BENCH / "sql_tool.py").is_file():
        results.append(
            _run_here(
                "sql_tool: execute_sql isolated execution vs the same SELECT run directly",
                [
                    "bench/sql_tool.py",
                    "--backend",
                    "both" if reason is None else "sqlite",
                    "--rows",
                    "10",
                    "1000",
                    "100000",
                    "--runs",
                    "5",
                    "--database-url",
                    server_url,
                ],
            )
        )
    admin_title = "admin: the log list, first pages, vs a raw first page"
    if reason is None:
        command = ["bench/admin.py", "--rows", "20000", "--database-url", server_url]
        results.append(_run_here(admin_title + " (PostgreSQL)", command))
    else:
        notes.append("admin on PostgreSQL skipped")
    results.append(_run_here(admin_title + " (SQLite)", ["bench/admin.py", "--backend", "sqlite", "--rows", "20000"]))
    # Clients come back after a 503, as the AI SDK's and ask.js do: the admission gate may refuse part of 20 POSTs
    # arriving at once on a slow machine (issue 38), which is not an error of the turns.
    live = ["bench/live_turns.py", "--rounds", "3", "--come-back"]
    sqlite_live = [*live, "--levels", "1", "20", "--sqlite", "--kill-turns", "0"]
    results.append(_run_here("live_turns: 20 concurrent turns vs one, Procfile processes, SQLite", sqlite_live))
    if reason is None:
        # live_turns (engine18's) names its database silvia_bench_live_<pid> and drops it, not its roles.
        def drop_live_roles(pid: int) -> None:
            if dropped := drop_database_roles(server_url, f"silvia_bench_live_{pid}"):
                notes.append(f"dropped the roles live_turns left: {', '.join(dropped)}")

        results.append(
            _run_here(
                "live_turns: the same on PostgreSQL, a worker killed, a stream process killed",
                [*live, "--levels", "1", "20", "--streams", "2", "--kill-turns", "10", "--database-url", server_url],
                drop_live_roles,
            )
        )
        results.append(
            _run_here(
                "live_streams: 300 event streams open on one stream process",
                ["bench/live_streams.py", "--streams", "300", "--rounds", "1", "--database-url", server_url],
            )
        )

    if reason is None:
        results.append(
            _run_here(
                "orm_vs_raw: the raw writes left in the code vs the ORM's bulk operations",
                ["bench/orm_vs_raw.py", "--database-url", server_url],
            )
        )
        dropped = sweep(server_url, run_prefix)
        if dropped:
            notes.append(f"dropped what a benchmark left behind: {', '.join(dropped)}")
    results.append(
        _run_here("sandbox: execute_python sandboxed vs unconfined; guarded printf vs SQLite's", ["bench/sandbox.py"])
    )

    results.append(
        _run_here("startup: manage.py check vs a bare project's; import_turns of one record", ["bench/startup.py"])
    )

    print("\n== issue 24's table (median, per-round range; details above)")
    for key in TABLE_LINES:
        print(f"  {_table.get(key, key + ' skipped: it needs PostgreSQL' if reason else key + ' MISSING')}")

    print(f"\n== summary ({time.perf_counter() - started:.0f}s)")
    for title, elapsed, status in results:
        print(f"  {'ok    ' if status == 0 else 'FAILED'} {elapsed:5.1f}s  {title}")
    for note in notes:
        print(f"  note: {note}")
    return 1 if any(status for _, _, status in results) else 0


if __name__ == "__main__":
    sys.exit(main())
