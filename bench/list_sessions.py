"""Benchmark: `GET /api/chat/sessions/` over real HTTP (the Procfile's `web:`) against a cheap-SQL floor (docs/api.md).

    .venv/bin/python bench/list_sessions.py [--sessions 10000] [--pages 1 150] [--runs 20] [--database-url URL]

A scratch PostgreSQL database holds the caller's `--sessions` sessions (1 to
5 turns each) and as many again of other users (so the table is twice the
caller's share), plus a user with no session. Two processes serve it: the
product (the Procfile's `web:` line, gunicorn on `silvia.wsgi`) and the floor
(`bench/_floor_app.py` on uvicorn: token lookup, `count(*)` and one page from
`chat_sessions` alone with a per-row `message_count` subquery, orjson). One
client GETs each over a kept-alive connection, taking turns.

It prints the empty list of each side (a user with no session: the fixed
cost of an answer; goal: product <= 2x the floor), then, for each page, the
product's time beyond its own empty list against the floor's time beyond
its own empty answer, round by round (goal <= 1.5): like with like, so the
fixed cost counts once, in the empty-list line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import random
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402
import psycopg  # noqa: E402

from bench._http import WEB, Server, django_env, scratch_postgres  # noqa: E402
from bench._load import add_user, copy_logs, copy_sessions, migrate, vacuum  # noqa: E402
from bench._timing import DEFAULT_SERVER_URL, Ratio, postgres_server_url, time_alternately  # noqa: E402

GOAL = 1.5
GOAL_EMPTY = 2.0
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def load(conninfo: str, sessions: int, seed: int = 13) -> tuple[str, str]:
    """The data; returns (token of the caller, token of the user with no session)."""
    rng = random.Random(seed)
    with psycopg.connect(conninfo) as conn:
        caller, caller_key = add_user(conn, "bench")
        _, empty_key = add_user(conn, "empty")
        others = [add_user(conn, f"other{n}")[0] for n in range(20)]
        rows = []
        for n in range(2 * sessions):
            owner = caller if n % 2 == 0 else others[n % 20]
            created = START + dt.timedelta(minutes=rng.randint(0, 500_000), microseconds=rng.randint(0, 999_999))
            rows.append(
                (
                    uuid.UUID(int=rng.getrandbits(128), version=4),
                    owner,
                    f"Session {n}",
                    created,
                    created + dt.timedelta(minutes=rng.randint(0, 600)),
                )
            )
        copy_sessions(conn, rows)
        logs = []
        for session_id, owner, _, created, updated in rows:
            for k in range(rng.randint(1, 5)):
                logs.append(
                    {
                        "id": uuid.UUID(int=rng.getrandbits(128), version=4),
                        "session_id": session_id,
                        "user_id": owner,
                        "user_message": "How much do I owe?",
                        "response": "You owe $1,234.",
                        "citations": [
                            {
                                "source": "silvia://analysis",
                                "title": "Analysis",
                                "cited_text": "1234",
                                "target": {"kind": "analysis"},
                            }
                        ],
                        "inline_citations": [],
                        "prompt_version": "v5",
                        "model": "claude-sonnet-4-5",
                        "created_at": created + (updated - created) * k / 5,
                    }
                )
        copy_logs(conn, logs)
    vacuum(conninfo)
    return caller_key, empty_key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--pages", type=int, nargs="+", default=[1, 150])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--database-url", help=f"PostgreSQL server (default DATABASE_URL when postgres://, else {DEFAULT_SERVER_URL})"
    )
    args = parser.parse_args(argv)
    server_url = postgres_server_url(args.database_url)
    with scratch_postgres(server_url, "list") as (conninfo, django_url):
        migrate(django_url)
        key, empty_key = load(conninfo, args.sessions)
        floor_env = {**django_env(django_url), "FLOOR_DATABASE": conninfo}
        with (
            Server(WEB, django_env(django_url)) as product,
            Server("bench._floor_app:app", floor_env) as floor,
        ):
            auth = {"Authorization": f"Token {key}"}
            p, f = product.client(auth), floor.client(auth)
            pe = product.client({"Authorization": f"Token {empty_key}"})
            fe = floor.client({"Authorization": f"Token {empty_key}"})
            timed: dict[str, Callable[[], object]] = {
                "product empty": lambda: pe.get("/api/chat/sessions/"),
                "floor empty": lambda: fe.get("/list?page=1"),
            }
            for page in args.pages:
                query = "" if page == 1 else f"?page={page}"
                mine, theirs = (
                    orjson.loads(p.get(f"/api/chat/sessions/{query}")),
                    orjson.loads(f.get(f"/list?page={page}")),
                )
                assert mine["count"] == theirs["count"] and mine["results"] == theirs["results"], (
                    f"page {page}: bodies differ"
                )
                timed[f"product page {page}"] = functools.partial(p.get, f"/api/chat/sessions/{query}")
                timed[f"floor page {page}"] = functools.partial(f.get, f"/list?page={page}")
            t = time_alternately(timed, runs=args.runs, warmup=3, collect=False)
    print(
        f"list_sessions bench, PostgreSQL over HTTP (uvicorn, 1 worker): caller has {args.sessions} sessions, "
        f"table {2 * args.sessions}, {args.runs} rounds"
    )
    for name, timings in t.items():
        print(timings.line(name, width=20))
    print(
        "  empty list (the API's fixed cost): product/floor "
        + Ratio.of(t["product empty"], t["floor empty"]).text(goal=GOAL_EMPTY)
    )
    for page in args.pages:
        beyond = t[f"product page {page}"].minus(t["product empty"])
        floor_beyond = t[f"floor page {page}"].minus(t["floor empty"])
        print(beyond.line(f"page {page}: product beyond its empty list", width=44))
        print(floor_beyond.line(f"page {page}: floor beyond its empty answer", width=44))
        print(
            f"  list page {page}, beyond the empty list: product/floor "
            + Ratio.of(beyond, floor_beyond).text(goal=GOAL)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
