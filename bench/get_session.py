"""Benchmark: `GET /api/chat/sessions/<id>` over real HTTP against the same-work floor (docs/api.md).

    .venv/bin/python bench/get_session.py            # 100, 2,000 and 10,000 messages; memory at 20,000
    .venv/bin/python bench/get_session.py --messages 100 2000 --memory-messages 0 --runs 10

One scratch PostgreSQL database (on `--database-url`, default DATABASE_URL
when it is a postgres:// URL, else postgres://postgres@127.0.0.1:5432/postgres;
dropped at the end) holds one session per size, each turn with 10
`citations` and 10 `inline_citations` of mixed kinds (every target kind,
untyped ones, an unknown kind, a malformed target, non-ASCII text), loaded
with COPY. Two processes (one worker each, access log off) serve it:

- product: the Procfile's `web:` process (gunicorn on `silvia.wsgi`, one worker process), DEBUG off;
- floor: `bench/_floor_app.py` on uvicorn, the least work any implementation does:
  raw psycopg (one kept connection), the token lookup, the session row, the
  messages with the JSON columns read as text and spliced into the body with
  `orjson.Fragment` (no decoding), one `orjson.dumps`.

One client GETs both over kept-alive connections, taking turns, after
checking once that the two bodies parse to the same value. It prints median
and p95 and product/floor per size (goal <= 1.15). Then memory: the product
worker's peak RSS (VmHWM) after a small GET and after GET of the
`--memory-messages` session (goal: it adds <= 64 MiB); this runs first, on
a fresh worker.

Reads on a replica (issue 36): `--replica` loads the scratch database on a throwaway primary with a
streaming replica of its own (tests/pg_replica.py) and gives the product `DATABASE_REPLICA_URL`, so its
GETs go through the router to the replica; `--beside PATH` serves another checkout's `web:` process (with
its own `.venv`: main's, say) on the primary too, timed in the same rounds, and prints product/beside for
the detail, the 304 and an empty list (goal: within 10%).

    .venv/bin/python bench/get_session.py --replica --beside /work/base --messages 100 --memory-messages 0
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import random
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402
import psycopg  # noqa: E402

from bench._http import WEB, Client, Server, django_env, scratch_postgres  # noqa: E402
from bench._load import add_user, copy_logs, copy_sessions, migrate, vacuum  # noqa: E402
from bench._timing import (  # noqa: E402
    DEFAULT_SERVER_URL,
    MIN_ROUNDS,
    postgres_server_url,
    ratio_line,
    time_alternately,
)

GOAL_FLOOR = 1.15
CITATIONS_PER_MESSAGE = 10

WORDS = [
    "the",
    "total",
    "balance",
    "of",
    "your",
    "account",
    "rose",
    "fell",
    "by",
    "percent",
    "since",
    "last",
    "month",
    "while",
    "fees",
    "interest",
    "dividends",
    "were",
    "paid",
    "on",
    "card",
    "statement",
    "credit",
    "limit",
    "apr",
    "mortgage",
    "escrow",
    "tax",
    "deduction",
    "contribution",
    "roth",
    "ira",
]
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
        0: (
            f"silvia://your-account/{name.lower().replace(' ', '-')}",
            name,
            {"kind": "account", "accountId": account_id, "provider": provider},
        ),
        1: (
            "silvia://your-account/credit-card",
            "Credit card",
            {
                "kind": "accounts",
                "accounts": [
                    {"accountId": "FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U", "provider": "plaid"},
                    {"accountId": "qozD68xagSpdzNis02f1g3FwR8N8ZJXFRzj2c", "provider": None},
                ],
            },
        ),
        2: ("silvia://your-portfolio", "Your portfolio", {"kind": "portfolio"}),
        3: (
            f"silvia://market-data/finnhub/{ticker}",
            f"{ticker} market data",
            {"kind": "market_data", "ticker": ticker},
        ),
        4: ("silvia://analysis", "Analysis", {"kind": "analysis"}),
        5: (
            "https://www.irs.gov/publications/p590a",
            "Publication 590-A",
            {"kind": "tax_reference", "url": "https://www.irs.gov/publications/p590a"},
        ),
        6: ("silvia://credit-card-corpus/chase/sapphire.md", "sapphire.md", {"kind": "card_document", "url": None}),
        7: (
            "https://www.ecfr.gov/current/title-12/part-1026",
            "Regulation Z",
            {"kind": "mortgage_reference", "url": "https://www.ecfr.gov/current/title-12/part-1026"},
        ),
        8: (
            "https://www.reuters.com/markets/us/stocks-rally-2026-11-02/",
            "Stocks rally — “record” close ✓",
            {"kind": "web", "url": "https://www.reuters.com/markets/us/stocks-rally-2026-11-02/"},
        ),
        9: ("silvia://search/search_web", None, None),  # untyped: no target key
        10: (
            "silvia://weather/austin",
            "Austin 日本 💳",
            {"kind": "weather", "city": "Austin", "temps": [21.5, 1e-07, 12345678901234567890]},
        ),
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
        "created_at": dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
        + dt.timedelta(seconds=index * 37, microseconds=index * 7919 % 1_000_000),
    }


def postgres_unreachable(server_url: str) -> str | None:
    """Why PostgreSQL at `server_url` cannot be used, or None when it answers."""
    import psycopg

    try:
        with psycopg.connect(server_url, connect_timeout=3) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return None


MEMORY_GOAL_MIB = 64
#: Goals of issue 24 per session size; other sizes get GOAL_FLOOR.
GOAL_BY_SIZE = {100: 1.3, 2000: 1.15, 10000: 1.15}
GOAL_NOT_MODIFIED = 2.0
GOAL_BESIDE = 1.10  # reads through the replica router: within 10% of the checkout beside


def print_not_modified(p: Client, f: Client, session_id: uuid.UUID, size: int, runs: int) -> None:
    """Time `If-None-Match` with the current ETag (a 304) against the floor's 304 (one indexed query)."""
    p.get(f"/api/chat/sessions/{session_id}")
    etag = p.last_headers["ETag"]
    f.get(f"/etag/{session_id}")
    floor_etag = f.last_headers["etag"]
    product_path, floor_path = f"/api/chat/sessions/{session_id}", f"/etag/{session_id}"
    assert p.get(product_path, expect=304, headers={"If-None-Match": etag}) == b""
    assert f.get(floor_path, expect=304, headers={"If-None-Match": floor_etag}) == b""
    t = time_alternately(
        {
            "product": functools.partial(p.get, product_path, expect=304, headers={"If-None-Match": etag}),
            "floor": functools.partial(f.get, floor_path, expect=304, headers={"If-None-Match": floor_etag}),
        },
        runs=runs,
        warmup=3,
        collect=False,
    )
    print(f"get_session bench, 304 with If-None-Match ({size}-turn session), {runs} rounds")
    print(t["product"].line("product 304"))
    print(t["floor"].line("floor 304 (token, one indexed query, hash)"))
    print(ratio_line(t["product"], t["floor"], goal=GOAL_NOT_MODIFIED, what="304: product/floor"), flush=True)


def load(conninfo: str, sizes: list[int], seed: int = 5) -> tuple[str, dict[int, uuid.UUID]]:
    """One session per size; returns (token key, {size: session id})."""
    rng = random.Random(seed)
    sessions: dict[int, uuid.UUID] = {}
    with psycopg.connect(conninfo) as conn:
        user_id, key = add_user(conn, "bench")
        for size in sorted(set(sizes)):
            session_id = uuid.UUID(int=rng.getrandbits(128), version=4)
            sessions[size] = session_id
            start = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
            copy_sessions(
                conn,
                [
                    (
                        session_id,
                        user_id,
                        f"Bench session — {size:,} turns",
                        start,
                        start + dt.timedelta(days=28, microseconds=123456),
                    )
                ],
            )
            copy_logs(
                conn,
                (
                    {
                        **generate_message(rng, index),
                        "id": uuid.UUID(int=rng.getrandbits(128), version=4),
                        "session_id": session_id,
                        "user_id": user_id,
                    }
                    for index in range(size)
                ),
            )
    vacuum(conninfo)
    return key, sessions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[100, 2000, 10000], help="session sizes to time")
    parser.add_argument(
        "--memory-messages", type=int, default=20000, help="session size for the memory check (0: skip)"
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=20,
        help="timed runs per size (fewer for big sessions: at most 200,000 turns in all)",
    )
    parser.add_argument("--etag-runs", type=int, default=30, help="rounds of the 304 comparison (0: skip)")
    parser.add_argument(
        "--database-url", help=f"PostgreSQL server (default DATABASE_URL when postgres://, else {DEFAULT_SERVER_URL})"
    )
    parser.add_argument("--replica", action="store_true", help="a throwaway primary + replica; reads via the router")
    parser.add_argument("--beside", type=Path, help="another checkout whose web process is timed beside (no replica)")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        pair = None
        if args.replica:
            from tests.pg_replica import ReplicaPair, postgres_bin

            binaries = postgres_bin()
            if binaries is None:
                print("get_session bench: skipped, --replica needs PostgreSQL's binaries (/usr/lib/postgresql)")
                return 0
            pair = ReplicaPair(binaries).start()
            stack.callback(pair.stop)
        return _run(args, pair)


def _run(args: argparse.Namespace, pair: Any) -> int:
    server_url = pair.url("primary") if pair is not None else postgres_server_url(args.database_url)
    reason = postgres_unreachable(server_url)
    if reason is not None:
        print(f"get_session bench: skipped, no PostgreSQL at {server_url} ({reason})")
        return 0
    sizes = list(args.messages) + ([args.memory_messages] if args.memory_messages else [])
    with scratch_postgres(server_url, "session") as (conninfo, django_url), contextlib.ExitStack() as servers:
        migrate(django_url)
        key, sessions = load(conninfo, sizes)
        with psycopg.connect(conninfo) as conn:
            _, empty_key = add_user(conn, "bench-empty")
        auth = {"Authorization": f"Token {key}"}
        floor_env = {**django_env(django_url), "FLOOR_DATABASE": conninfo}
        product_env = django_env(django_url)
        if pair is not None:
            pair.wait_caught_up()
            product_env["DATABASE_REPLICA_URL"] = pair.url("replica", django_url.rsplit("/", 1)[1])
        product = servers.enter_context(Server(WEB, product_env))
        floor = servers.enter_context(Server("bench._floor_app:app", floor_env))
        beside = servers.enter_context(Server(WEB, django_env(django_url), root=args.beside)) if args.beside else None
        p, f = product.client(auth), floor.client(auth)
        if args.memory_messages:
            p.get(f"/api/chat/sessions/{sessions[min(sizes)]}")
            before = product.peak_rss_mib()
            body = p.get(f"/api/chat/sessions/{sessions[args.memory_messages]}")
            after = product.peak_rss_mib()
            added = after - before
            print(
                f"get_session memory: {args.memory_messages} messages, body {len(body) / 1e6:.1f} MB; "
                f"worker peak RSS {before:.0f} MiB -> {after:.0f} MiB, adds {added:.0f} MiB "
                f"(goal <= {MEMORY_GOAL_MIB}: {'met' if added <= MEMORY_GOAL_MIB else 'NOT MET'})",
                flush=True,
            )
            del body
        for size in args.messages:
            url = f"/api/chat/sessions/{sessions[size]}"
            floor_url = f"/detail/{sessions[size]}"
            mine = p.get(url)
            assert orjson.loads(mine) == orjson.loads(f.get(floor_url)), (
                f"{size} messages: product and floor bodies differ"
            )
            runs = max(MIN_ROUNDS, min(args.runs, 200_000 // size))
            t = time_alternately(
                {"product": functools.partial(p.get, url), "floor": functools.partial(f.get, floor_url)},
                runs=runs,
                warmup=1,
            )
            print(
                f"get_session bench, PostgreSQL over HTTP (1 worker each): {size} messages, "
                f"body {len(mine) / 1e6:.1f} MB, {runs} rounds"
            )
            print(t["product"].line("product (gunicorn, silvia.wsgi, token auth)"))
            print(t["floor"].line("floor (raw psycopg + orjson, JSON as text)"))
            goal = GOAL_BY_SIZE.get(size, GOAL_FLOOR)
            print(ratio_line(t["product"], t["floor"], goal=goal, what=f"detail {size} turns: product/floor"))
            print(flush=True)
        if args.etag_runs:
            size = min(args.messages)
            print_not_modified(p, f, sessions[size], size, args.etag_runs)
        if beside is not None:
            print_beside(product, beside, auth, empty_key, sessions[min(args.messages)], args.etag_runs or 30)
    return 0


def print_beside(
    product: Server, beside: Server, auth: dict[str, str], empty_key: str, session: uuid.UUID, runs: int
) -> None:
    """The product (through the replica router when `--replica`) against another checkout's web process, same
    rounds: the detail of the smallest session, its 304 and an empty list (the API's fixed cost)."""
    p, b = product.client(auth), beside.client(auth)
    pe, be = (
        product.client({"Authorization": f"Token {empty_key}"}),
        beside.client({"Authorization": f"Token {empty_key}"}),
    )
    path = f"/api/chat/sessions/{session}"
    assert orjson.loads(p.get(path)) == orjson.loads(b.get(path))
    etag = p.last_headers["ETag"]
    not_modified = {"If-None-Match": etag}
    for what, mine, theirs in [
        ("detail", functools.partial(p.get, path), functools.partial(b.get, path)),
        (
            "304",
            functools.partial(p.get, path, expect=304, headers=not_modified),
            functools.partial(b.get, path, expect=304, headers=not_modified),
        ),
        (
            "empty list",
            functools.partial(pe.get, "/api/chat/sessions/"),
            functools.partial(be.get, "/api/chat/sessions/"),
        ),
    ]:
        t = time_alternately({"product": mine, "beside": theirs}, runs=runs, warmup=3, collect=False)
        print(f"get_session bench, beside {beside.root}: {what}, {runs} rounds")
        print(t["product"].line(f"product {what}"))
        print(t["beside"].line(f"beside {what}"))
        print(ratio_line(t["product"], t["beside"], goal=GOAL_BESIDE, what=f"{what}: product/beside"), flush=True)


if __name__ == "__main__":
    sys.exit(main())
