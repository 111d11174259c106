"""Benchmark: `GET /api/chat/sessions/<id>` against a raw query + orjson baseline (docs/api.md).

    .venv/bin/python bench/get_session.py                                # both databases, 2,000 messages, 20 runs
    .venv/bin/python bench/get_session.py --backend postgres --runs 50
    .venv/bin/python bench/get_session.py --backend sqlite --messages 500

The session holds `--messages` turns, each with 10 `citations` and 10
`inline_citations` of mixed kinds (every target kind, untyped ones, an
unknown kind, a malformed target, non-ASCII text). They are loaded with
`bulk_create` into a scratch database that is dropped at the end:

- PostgreSQL: `CREATE DATABASE silvia_bench_<pid>` on the server of
  `--database-url` (default: DATABASE_URL when it is a postgres:// URL, else
  postgres://postgres@127.0.0.1:5432/postgres); the role needs CREATEDB. With
  `--backend both` an unreachable server is reported and skipped.
- SQLite: a file in a temporary folder.

Then, taking turns, `--runs` times each:

- view: `GET /api/chat/sessions/<id>` through Django's test client with token
  auth (the full stack: middleware, DRF auth, 3 queries, response body);
- baseline: one raw query (psycopg, or sqlite3) for the same message rows,
  the JSON columns decoded by `orjson.loads`, and `orjson.dumps` of the same
  response shape;
- floor: the same query with the JSON columns kept as text and spliced into
  the body (`orjson.Fragment`): no decoding at all, the least work any
  implementation can do. Shown for scale; the goal is against the baseline.

It checks once that the view and the baseline bodies parse to the same
value, then prints median and p95 of each and the view/baseline ratio
(goal: at most 1.5). Each backend runs in its own process (Django's default
database is the scratch one).
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._timing import DEFAULT_SERVER_URL, Timings, postgres_server_url, ratio_line, time_alternately  # noqa: E402

GOAL_RATIO = 1.5
CITATIONS_PER_MESSAGE = 10

WORDS = (
    "the total balance of your account rose fell by percent since last month while fees interest dividends "
    "were paid on card statement credit limit apr mortgage escrow tax deduction contribution roth ira"
).split()
ACCOUNTS = [
    ("Checking", "ZtLFsthnkAxRzuUr1nu1CQAWtci7Jytl9ooyT", "plaid"),
    ("Savings", "a8Kq2LmN4pR6sT8vX0zB3dF5hJ7kM9nP1rQ", "plaid"),
    ("Brokerage", "snap-7c2e9a41-5b3d-4f60-8e1a-2d4c6b8f0a13", "snaptrade"),
    ("House fund", "0f6b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d", "manual"),
]
TICKERS = ["AAPL", "MSFT", "NVDA", "BRK.B", "VTI"]


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def _citation(rng: random.Random, n: int) -> dict[str, Any]:
    """One citation of the kind `n` picks (every target kind, untyped, unknown and malformed)."""
    kind = n % 12
    name, account_id, provider = ACCOUNTS[n % len(ACCOUNTS)]
    ticker = TICKERS[n % len(TICKERS)]
    source, title, target = {
        0: (f"silvia://your-account/{name.lower().replace(' ', '-')}", name, {"kind": "account", "accountId": account_id, "provider": provider}),
        1: ("silvia://your-account/credit-card", "Credit card", {"kind": "accounts", "accounts": [
            {"accountId": "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U", "provider": "plaid"},
            {"accountId": "qozD68xagSpdzNis02f1g3FwR8N8ZJXFRzj2c", "provider": None}]}),
        2: ("silvia://your-portfolio", "Your portfolio", {"kind": "portfolio"}),
        3: (f"silvia://market-data/finnhub/{ticker}", f"{ticker} market data", {"kind": "market_data", "ticker": ticker}),
        4: ("silvia://analysis", "Analysis", {"kind": "analysis"}),
        5: ("https://www.irs.gov/publications/p590a", "Publication 590-A", {"kind": "tax_reference", "url": "https://www.irs.gov/publications/p590a"}),
        6: ("silvia://credit-card-corpus/chase/sapphire.md", "sapphire.md", {"kind": "card_document", "url": None}),
        7: ("https://www.ecfr.gov/current/title-12/part-1026", "Regulation Z", {"kind": "mortgage_reference", "url": "https://www.ecfr.gov/current/title-12/part-1026"}),
        8: ("https://www.reuters.com/markets/us/stocks-rally-2026-11-02/", "Stocks rally — “record” close ✓", {"kind": "web", "url": "https://www.reuters.com/markets/us/stocks-rally-2026-11-02/"}),
        9: ("silvia://search/search_web", None, None),  # untyped: no target key
        10: ("silvia://weather/austin", "Austin 日本 💳", {"kind": "weather", "city": "Austin", "temps": [21.5, 1e-07, 12345678901234567890]}),
        11: ("silvia://your-account/old", "Old", {"kind": "account"}),  # malformed: served as stored
    }[kind]
    citation: dict[str, Any] = {"source": source, "title": title, "cited_text": _text(rng, 8, 40)}
    if target is not None:
        citation["target"] = target
    return citation


def generate_message(rng: random.Random, index: int) -> dict[str, Any]:
    """The columns of one `ai_chat_logs` row: 10 citations and 10 inline citations of mixed kinds."""
    response = _text(rng, 80, 220)
    citations = [_citation(rng, index * CITATIONS_PER_MESSAGE + k) for k in range(CITATIONS_PER_MESSAGE)]
    inline = []
    position = 0
    for citation in citations:
        start = position + rng.randint(0, 40)
        position = start + rng.randint(5, 60)
        entry = {key: value for key, value in citation.items() if key != "target"}
        entry.update(start=start, end=position)
        if "target" in citation:
            entry["target"] = citation["target"]
        inline.append(entry)
    return {
        "user_message": _text(rng, 5, 25) + "?",
        "response": response,
        "citations": citations,
        "inline_citations": inline,
        "prompt_version": "v5" if index % 5 else "legacy",
        "model": "claude-sonnet-4-5-20250929",
        # Microseconds vary, as timezone.now() values do.
        "created_at": dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=index * 37, microseconds=index * 7919 % 1_000_000),
    }


# --------------------------------------------------------------------------
# One backend, in this process


def _setup_django(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "silvia.settings")
    import django

    django.setup()


def _load(messages: int, seed: int) -> tuple[Any, str]:
    """Migrate the scratch database and load one session; returns (session, token key)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from chat.models import ChatLog, ChatSession

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create(username="bench")
    token = Token.objects.create(user=user)
    rng = random.Random(seed)
    session = ChatSession.objects.create(
        user=user,
        title="Bench session — 2,000 turns",
        created_at=dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc),
        updated_at=dt.datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=dt.timezone.utc),
    )
    logs = []
    for index in range(messages):
        columns = generate_message(rng, index)
        logs.append(ChatLog(id=uuid.UUID(int=rng.getrandbits(128), version=4), session=session, user=user, **columns))
    ChatLog.objects.bulk_create(logs, batch_size=500)
    return session, token.key


def _session_header(session: Any) -> dict[str, Any]:
    def utc(value: dt.datetime) -> str:
        return value.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")

    return {"id": str(session.id), "title": session.title, "created_at": utc(session.created_at), "updated_at": utc(session.updated_at)}


_SELECT = (
    "SELECT id, user_message, response, citations, inline_citations, prompt_version, model, created_at "
    "FROM ai_chat_logs WHERE session_id = {param} ORDER BY created_at, id"
)


def _postgres_baselines(database_url: str, session: Any) -> tuple[Any, Any, Any]:
    """(baseline, floor, close) on a raw psycopg connection."""
    import orjson
    import psycopg
    from psycopg.types.json import set_json_loads
    from psycopg.types.string import TextLoader

    header = _session_header(session)
    query = _SELECT.format(param="%s")
    # Same session time zone as Django's connections, so timestamps come back in UTC.
    decoded = psycopg.connect(database_url, options="-c TimeZone=UTC")
    set_json_loads(orjson.loads, decoded)
    as_text = psycopg.connect(database_url, options="-c TimeZone=UTC")
    as_text.adapters.register_loader("jsonb", TextLoader)

    def body(connection: Any, wrap: Any) -> bytes:
        rows = connection.execute(query, [session.id]).fetchall()
        messages = [
            {
                "id": id_,
                "user_message": user_message,
                "response": response,
                "citations": wrap(citations),
                "inline_citations": wrap(inline),
                "prompt_version": prompt_version,
                "model": model,
                "created_at": created_at,
            }
            for id_, user_message, response, citations, inline, prompt_version, model, created_at in rows
        ]
        return orjson.dumps({**header, "messages": messages}, option=orjson.OPT_UTC_Z)

    def close() -> None:
        decoded.close()
        as_text.close()

    return (lambda: body(decoded, lambda value: value)), (lambda: body(as_text, orjson.Fragment)), close


def _sqlite_baselines(path: str, session: Any) -> tuple[Any, Any, Any]:
    """(baseline, floor, close) on a raw sqlite3 connection (Django's storage: uuid as 32 hex, UTC text times)."""
    import sqlite3

    import orjson

    header = _session_header(session)
    query = _SELECT.format(param="?")
    connection = sqlite3.connect(path)

    def body(wrap: Any) -> bytes:
        rows = connection.execute(query, [session.id.hex]).fetchall()
        messages = [
            {
                "id": str(uuid.UUID(id_)),
                "user_message": user_message,
                "response": response,
                "citations": wrap(citations),
                "inline_citations": wrap(inline),
                "prompt_version": prompt_version,
                "model": model,
                "created_at": created_at.replace(" ", "T") + "Z",
            }
            for id_, user_message, response, citations, inline, prompt_version, model, created_at in rows
        ]
        return orjson.dumps({**header, "messages": messages})

    return (lambda: body(orjson.loads)), (lambda: body(orjson.Fragment)), connection.close


def run_backend(*, backend: str, messages: int, runs: int, server_url: str, seed: int = 5) -> dict[str, Any]:
    """Create the scratch database, load, time view/baseline/floor, drop it; returns the figures."""
    import psycopg
    from psycopg import sql

    scratch_dir = None
    scratch_name = None
    if backend == "postgres":
        scratch_name = f"silvia_bench_{os.getpid()}"
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(scratch_name)))
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(scratch_name)))
        scratch_url = psycopg.conninfo.make_conninfo(server_url, dbname=scratch_name)
        params = psycopg.conninfo.conninfo_to_dict(scratch_url)
        auth = params.get("user", "postgres") + (f":{params['password']}" if params.get("password") else "")
        django_url = f"postgres://{auth}@{params.get('host', '127.0.0.1')}:{params.get('port', 5432)}/{scratch_name}"
    else:
        scratch_dir = tempfile.mkdtemp(prefix="silvia_bench_")
        sqlite_path = os.path.join(scratch_dir, "bench.sqlite3")
        django_url = f"sqlite:///{sqlite_path}"
    close_baselines = None
    try:
        _setup_django(django_url)
        from django.db import connection
        from rest_framework.test import APIClient

        session, token = _load(messages, seed)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        url = f"/api/chat/sessions/{session.id}"

        def view() -> bytes:
            response = client.get(url)
            assert response.status_code == 200, response.status_code
            return response.content

        if backend == "postgres":
            baseline, floor, close_baselines = _postgres_baselines(scratch_url, session)
        else:
            baseline, floor, close_baselines = _sqlite_baselines(sqlite_path, session)

        import orjson

        queries: list[str] = []

        def count(execute: Any, sql_text: str, params: Any, many: bool, context: Any) -> Any:
            queries.append(sql_text)
            return execute(sql_text, params, many, context)

        with connection.execute_wrapper(count):
            body = view()
        assert orjson.loads(body) == orjson.loads(baseline()) == orjson.loads(floor()), "view and baseline bodies differ"
        timings = time_alternately({"view": view, "baseline": baseline, "floor": floor}, runs=runs)
        return {
            "backend": backend,
            "messages": messages,
            "runs": runs,
            "body_bytes": len(body),
            "queries": len(queries),
            **timings,
        }
    finally:
        if close_baselines is not None:
            close_baselines()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: BLE001 - Django may not have been set up
            pass
        if scratch_name is not None:
            with psycopg.connect(server_url, autocommit=True) as admin:
                admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(scratch_name)))
        if scratch_dir is not None:
            shutil.rmtree(scratch_dir, ignore_errors=True)


def format_figures(f: dict[str, Any]) -> str:
    view, baseline, floor = f["view"], f["baseline"], f["floor"]
    assert isinstance(view, Timings) and isinstance(baseline, Timings) and isinstance(floor, Timings)
    name = {"postgres": "PostgreSQL", "sqlite": "SQLite"}[f["backend"]]
    return "\n".join(
        [
            f"get_session bench, {name}: {f['messages']} messages x ({CITATIONS_PER_MESSAGE} citations + "
            f"{CITATIONS_PER_MESSAGE} inline), body {f['body_bytes'] / 1e6:.1f} MB, {f['queries']} queries per GET, {f['runs']} runs",
            view.line("view (test client GET, token auth)"),
            baseline.line("baseline (raw query + orjson, JSON decoded)"),
            floor.line("floor (raw query, JSON spliced as text)"),
            ratio_line(view, baseline, goal=GOAL_RATIO, what="view/baseline"),
            f"  view/floor (median) {view.median / floor.median:.2f}",
        ]
    )


# --------------------------------------------------------------------------
# Command line


def postgres_unreachable(server_url: str) -> str | None:
    """Why PostgreSQL at `server_url` cannot be used, or None when it answers."""
    import psycopg

    try:
        with psycopg.connect(server_url, connect_timeout=3) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--messages", type=int, default=2000, help="messages in the session (default 2000)")
    parser.add_argument("--runs", type=int, default=20, help="timed runs of each (default 20; at least 20 for a p95)")
    parser.add_argument(
        "--database-url",
        help=f"a PostgreSQL server to create the scratch database on (default DATABASE_URL when postgres://, else {DEFAULT_SERVER_URL})",
    )
    args = parser.parse_args(argv)
    if args.messages < 1 or args.runs < 1:
        parser.error("--messages and --runs must be positive")
    server_url = postgres_server_url(args.database_url)

    if args.backend == "both":
        # Django's default database is fixed per process: one child per backend.
        status = 0
        for backend in ("postgres", "sqlite"):
            if backend == "postgres":
                reason = postgres_unreachable(server_url)
                if reason is not None:
                    print(f"get_session bench, PostgreSQL: skipped, no server at {server_url} ({reason})", flush=True)
                    continue
            command = [sys.executable, __file__, "--backend", backend, "--messages", str(args.messages), "--runs", str(args.runs), "--database-url", server_url]
            status |= subprocess.call(command, cwd=ROOT)
        return status

    if args.backend == "postgres":
        reason = postgres_unreachable(server_url)
        if reason is not None:
            print(f"get_session bench, PostgreSQL: no server at {server_url} ({reason})", file=sys.stderr)
            return 2
    figures = run_backend(backend=args.backend, messages=args.messages, runs=args.runs, server_url=server_url)
    print(format_figures(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
