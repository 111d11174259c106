"""Benchmark: the admin's log list over a big `ai_chat_logs` table (issue 12).

    .venv/bin/python bench/admin.py                              # PostgreSQL, 1,000,000 rows
    .venv/bin/python bench/admin.py --rows 20000                 # what `make bench` runs
    .venv/bin/python bench/admin.py --backend sqlite --rows 100000

PostgreSQL: `--database-url`, else DATABASE_URL when it is a postgres:// URL,
else postgres://postgres@127.0.0.1:5432/postgres; a scratch database is
created (the role needs CREATEDB), migrated and dropped at the end. SQLite: a
temporary file, removed at the end.

Rows are loaded with COPY (PostgreSQL) or executemany (SQLite), never through
the service: mixed target kinds, 5 to 20 citations a row, each also an
inline citation, account ids from a pool of owners; 80% of the rows carry
support on their inline citations (`SUPPORT_WEIGHTS`; the rest are old rows
without it). The PostgreSQL indexes of
migrations 0003 and 0011 are dropped for the load and built after it, as a bulk load
would (their build time is printed).

Timed, median and p95 of `--runs` (default 10) after 2 untimed rounds, taking
turns: `GET /admin/chat/chatlog/` through Django's test client as a
superuser, with nothing, `?target_kind=account`, `?target_kind=untyped`,
`?support=flagged` and `?support=unsupported` (SPEC 15: the support filter
beside the kind filter, asked of the same GIN index), and
`?q=<an account id>`; the baseline is raw SQL (psycopg / sqlite3) reading the
same first 100 rows unfiltered with their session title and username, no
JSON touched: the floor any first page costs. Goal: each page at most 300 ms.
It then prints `EXPLAIN` of the page and count queries the admin ran for
the kind filter, the support filters and the account-id search.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import random
import sqlite3
import string
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._timing import DEFAULT_SERVER_URL, postgres_server_url, time_alternately  # noqa: E402

GOAL_MS = 300.0
#: The migrations whose PostgreSQL indexes the admin reads through: dropped for the load, built after it.
INDEX_MIGRATIONS = ("0003_admin_reads_json", "0011_support_filter_indexes")
OWNER_ROWS = 50  # about this many rows per owner, so an account id is in a few dozen rows
LABELS = ("checking", "savings", "credit-card", "brokerage")
# Themes a row's citations are drawn from (1 to 3 per row), with weights.
THEMES = {
    "account": 8,
    "accounts": 3,
    "untyped": 12,
    "web": 8,
    "library": 8,
    "market": 10,
    "analysis": 10,
    "portfolio": 10,
}
COLUMNS = (
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


def _account_id(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_letters + string.digits, k=37))


def owner_accounts(owner: int, seed: int) -> list[str]:
    """The 3 account ids of one owner (deterministic)."""
    rng = random.Random(seed * 1_000_003 + owner)
    return [_account_id(rng) for _ in range(3)]


def _entry(rng: random.Random, theme: str, accounts: list[str], n: int) -> dict[str, Any]:
    text = {"title": f"t{n}", "cited_text": f"value {rng.randrange(10_000)}"}
    if theme == "account":
        index = rng.randrange(len(accounts))
        target: Any = {"kind": "account", "accountId": accounts[index], "provider": "plaid"}
        return {"source": f"silvia://your-account/{LABELS[index]}", **text, "target": target}
    if theme == "accounts":
        refs = [{"accountId": a, "provider": rng.choice(["plaid", None])} for a in accounts[:2]]
        return {"source": "silvia://your-account/credit-card", **text, "target": {"kind": "accounts", "accounts": refs}}
    if theme == "untyped":
        return {"source": f"silvia://your-account/{rng.choice(LABELS)}", **text}
    if theme == "web":
        url = f"https://www.example{rng.randrange(500)}.org/rates"
        return {"source": url, **text, "target": {"kind": "web", "url": url}}
    if theme == "library":
        return {"source": "silvia://tax-authority/irs/p17.md", **text, "target": {"kind": "tax_reference", "url": None}}
    if theme == "market":
        ticker = rng.choice(["AAPL", "MSFT", "NVDA", "VTI"])
        target = {"kind": "market_data", "ticker": ticker}
        return {"source": f"silvia://market-data/finnhub/{ticker}", **text, "target": target}
    if theme == "analysis":
        return {"source": "silvia://analysis", **text, "target": {"kind": "analysis"}}
    return {"source": "silvia://your-portfolio", **text, "target": {"kind": "portfolio"}}


def generate_row(rng: random.Random, accounts: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(citations, inline_citations): 5 to 20 citations from 1 to 3 themes, 1% of rows with a malformed target."""
    themes = rng.choices(list(THEMES), weights=list(THEMES.values()), k=rng.randint(1, 3))
    citations = [_entry(rng, rng.choice(themes), accounts, n) for n in range(rng.randint(5, 20))]
    if rng.random() < 0.01:
        citations[0] = {**citations[0], "target": {"kind": "account"}}
    inline = [{**entry, "start": 4 * n, "end": 4 * n + 3} for n, entry in enumerate(citations)]
    old = rng.random() < 0.2  # saved before support existed: no `support` key
    for n, entry in enumerate([] if old else inline):
        entry["support"] = _support(rng, 4 * n)
    return citations, inline


# Support statuses of a new row's inline citations (SPEC 15), with weights: most figures are found.
SUPPORT_WEIGHTS = {"supported": 90, "partly_supported": 3, "unsupported": 1, "unchecked": 6}


def _support(rng: random.Random, start: int) -> dict[str, Any]:
    status = rng.choices(list(SUPPORT_WEIGHTS), weights=list(SUPPORT_WEIGHTS.values()))[0]
    unmatched = (
        [{"text": "$3", "start": start, "end": start + 2}] if status in ("partly_supported", "unsupported") else []
    )
    digest = None if status == "unchecked" else "sha256:" + rng.getrandbits(256).to_bytes(32, "big").hex()
    return {"status": status, "unmatched": unmatched, "digest": digest}


def owner_count(count: int) -> int:
    """Owners (users, each with 3 accounts) for `count` rows."""
    return max(1, count // OWNER_ROWS)


def rows(count: int, *, session_id: uuid.UUID, user_ids: list[int], seed: int) -> Any:
    """Yield `COLUMNS` tuples (JSON as text); row owners are `user_ids[owner]`."""
    rng = random.Random(seed)
    owners = owner_count(count)
    started = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    for n in range(count):
        owner = rng.randrange(owners)
        citations, inline = generate_row(rng, owner_accounts(owner, seed))
        yield (
            uuid.UUID(int=rng.getrandbits(128), version=4),
            session_id,
            user_ids[owner],
            f"question {n}",
            "answer",
            json.dumps(citations),
            json.dumps(inline),
            "v5",
            "claude-sonnet-4-5-20250929",
            started + dt.timedelta(seconds=30 * n),
        )


# -- setup per backend ------------------------------------------------------------


def _setup_django(database_url: str, static_root: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    # The production storage (hashed names from collectstatic's manifest) in a
    # folder of our own: a fresh clone has no manifest, and the admin's pages
    # would be a 500 without one.
    os.environ["DJANGO_STATIC_ROOT"] = static_root
    from bench._django import use_bench_settings

    use_bench_settings()
    import django
    from django.core.management import call_command

    django.setup()
    call_command("collectstatic", interactive=False, verbosity=0)


def _prepare(count: int, seed: int) -> tuple[Any, list[int], str]:
    """Migrate; create the staff user, one user per owner and a session.

    Returns (session, the owners' user ids, the account id searched).
    """
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from chat.models import ChatSession

    call_command("migrate", verbosity=0)
    users = get_user_model().objects
    staff = users.create(username="bench-admin", is_staff=True, is_superuser=True)
    owners = users.bulk_create([users.model(username=f"owner{n}") for n in range(owner_count(count))], batch_size=5000)
    session = ChatSession.objects.create(user=staff, title="bench")
    return session, [owner.pk for owner in owners], owner_accounts(0, seed)[0]


def load_postgresql(url: str, count: int, *, session: Any, user_ids: list[int], seed: int) -> dict[str, float]:
    """COPY the rows with the admin's indexes dropped (migrations 0003 and 0011), then build them; returns
    seconds per phase."""
    import psycopg

    migrations = [importlib.import_module(f"chat.migrations.{name}") for name in INDEX_MIGRATIONS]
    seconds: dict[str, float] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in (drop for migration in migrations for drop in migration.POSTGRESQL_DROP):
            conn.execute(statement)
        started = time.perf_counter()
        with conn.cursor() as cursor, cursor.copy(f"COPY ai_chat_logs ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for row in rows(count, session_id=session.id, user_ids=user_ids, seed=seed):
                copy.write_row(row)
        seconds["load"] = time.perf_counter() - started
        conn.execute("SET maintenance_work_mem = '512MB'")
        for statement in (index for migration in migrations for index in migration.POSTGRESQL_INDEXES):
            started = time.perf_counter()
            conn.execute(statement)
            seconds[statement.split(" ON ")[0].rsplit(" ", 1)[-1]] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute("VACUUM ANALYZE ai_chat_logs")
        seconds["vacuum analyze"] = time.perf_counter() - started
    return seconds


def load_sqlite(path: str, count: int, *, session: Any, user_ids: list[int], seed: int) -> dict[str, float]:
    started = time.perf_counter()
    with sqlite3.connect(path) as conn:
        placeholders = ", ".join("?" * len(COLUMNS))
        conn.executemany(
            f"INSERT INTO ai_chat_logs ({', '.join(COLUMNS)}) VALUES ({placeholders})",
            (
                (row[0].hex, row[1].hex, *row[2:9], row[9].strftime("%Y-%m-%d %H:%M:%S"))
                for row in rows(count, session_id=session.id, user_ids=user_ids, seed=seed)
            ),
        )
        conn.execute("ANALYZE")
    return {"load": time.perf_counter() - started}


# -- timing -----------------------------------------------------------------------


def _baseline(backend: str, url_or_path: str) -> Any:
    """The floor of a first page: 100 newest rows with session title and username, raw SQL, no JSON."""
    query = (
        "SELECT l.id, l.created_at, substr(l.user_message, 1, 81), l.prompt_version, s.title, u.username "
        "FROM ai_chat_logs l JOIN chat_sessions s ON s.id = l.session_id JOIN auth_user u ON u.id = l.user_id "
        "ORDER BY l.created_at DESC, l.id DESC LIMIT 100"
    )
    if backend == "postgresql":
        import psycopg

        conn = psycopg.connect(url_or_path, autocommit=True)
        return lambda: conn.execute(query).fetchall()
    lite = sqlite3.connect(url_or_path)
    return lambda: lite.execute(query).fetchall()


def run(backend: str, count: int, runs: int, seed: int, server_url: str) -> int:
    from bench._scratch import create_database, database_urls, drop_database, scratch_name

    cleanup: Any
    folder = tempfile.TemporaryDirectory(prefix="silvia_bench_admin_")
    if backend == "postgresql":
        scratch = scratch_name("admin")
        create_database(server_url, scratch)
        target, url = database_urls(server_url, scratch)

        def cleanup() -> None:
            from django.db import connections

            connections.close_all()
            drop_database(server_url, scratch)
            folder.cleanup()
    else:
        target = str(Path(folder.name) / "bench.sqlite3")
        url = f"sqlite:///{target}"
        cleanup = folder.cleanup
    try:
        _setup_django(url, str(Path(folder.name) / "static"))
        return _measure(backend, target, count, runs, seed)
    finally:
        cleanup()


def _measure(backend: str, target: str, count: int, runs: int, seed: int) -> int:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    session, user_ids, account_id = _prepare(count, seed)
    print(f"admin changelist, {backend}, {count:,} rows, median of {runs}", flush=True)
    loader = load_postgresql if backend == "postgresql" else load_sqlite
    load = loader(target, count, session=session, user_ids=user_ids, seed=seed)
    print("  load: " + ", ".join(f"{name} {secs:.1f}s" for name, secs in load.items()), flush=True)

    client = Client()
    client.force_login(session.user)
    cases = {
        "unfiltered": {},
        "target_kind=account": {"target_kind": "account"},
        "target_kind=untyped": {"target_kind": "untyped"},
        "support=flagged": {"support": "flagged"},
        "support=unsupported": {"support": "unsupported"},
        "q=<account id>": {"q": account_id},
    }

    def page(params: dict[str, str]) -> Any:
        def get() -> None:
            response = client.get("/admin/chat/chatlog/", params)
            assert response.status_code == 200, response.status_code

        return get

    timed = {"baseline: raw first page": _baseline(backend, target)} | {name: page(p) for name, p in cases.items()}
    timings = time_alternately(timed, runs=runs)
    floor = timings["baseline: raw first page"]
    missed = 0
    for name, result in timings.items():
        extra = ""
        if name in cases:
            met = result.median * 1000 <= GOAL_MS
            missed += not met
            verdict = "met" if met else "NOT MET"
            extra = f"  x{result.median / floor.median:6.1f} baseline  (goal <= {GOAL_MS:.0f} ms: {verdict})"
        print(result.line(name, width=28) + extra, flush=True)

    for name in ("target_kind=account", "support=flagged", "support=unsupported", "q=<account id>"):
        with CaptureQueriesContext(connection) as captured:
            response = client.get("/admin/chat/chatlog/", cases[name])
        found = response.content.decode().count('class="action-select"')
        queries = [q["sql"] for q in captured.captured_queries if "ai_chat_logs" in q["sql"]]
        print(f"\n  EXPLAIN ({name}; {found} rows on the page): count query, then page query", flush=True)
        for sql_text in queries:
            with connection.cursor() as cursor:
                prefix = "EXPLAIN (ANALYZE, COSTS OFF) " if backend == "postgresql" else "EXPLAIN QUERY PLAN "
                cursor.execute(prefix + sql_text)
                plan = [str(line[0] if backend == "postgresql" else line[-1]) for line in cursor.fetchall()]
            print("\n".join("    " + line for line in plan), flush=True)
            print("    --", flush=True)
    return missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument(
        "--database-url", help=f"PostgreSQL server (default DATABASE_URL when postgres://, else {DEFAULT_SERVER_URL})"
    )
    args = parser.parse_args(argv)
    if args.rows < 1 or args.runs < 1:
        parser.error("--rows and --runs must be positive")
    missed = run(args.backend, args.rows, args.runs, args.seed, postgres_server_url(args.database_url))
    # A missed goal is reported, not a failure (bench/run_all.py): the figures say it.
    print(f"\n  goals missed: {missed}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
