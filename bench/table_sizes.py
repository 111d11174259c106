"""Benchmark: rows and bytes each live turn adds to each table, on PostgreSQL (issue 36, docs/scaling.md).

    .venv/bin/python bench/table_sizes.py                  # 60 turns, 10 at once
    .venv/bin/python bench/table_sizes.py --turns 200 --at-once 20

A scratch database (dropped at the end), migrated; the recorded model in this process answering each turn
as bench/live_turns.py's script does (one `read_credit_card_document` round with its checkpoint, then a cited
answer of about 50 text events, 20 ms apart); the Procfile's `stream:` and `worker:` processes on RabbitMQ
when it answers (else the embedded broker). Each user asks one question in a session of its own. Before
and after the turns, every table's exact row count and `pg_total_relation_size` (heap, TOAST and indexes;
8 KiB pages, so run enough turns), then per turn: rows added, bytes added as written, and again after a
`VACUUM` (the dead versions a turn's updates leave are reused then, the files do not shrink). Tables that
did not change are left out. Broker messages live in RabbitMQ, not here.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._timing import postgres_server_url  # noqa: E402


def sizes() -> dict[str, tuple[int, int]]:
    """{table: (rows, total bytes)} for every table of the public schema (exact counts)."""
    from django.db import connection

    out = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = "
            "c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY 1"
        )
        for name, size in cursor.fetchall():
            cursor.execute(f'SELECT count(*) FROM "{name}"')
            out[name] = (int(cursor.fetchone()[0]), int(size))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--at-once", type=int, default=10, help="turns streaming at once")
    parser.add_argument("--database-url", help="a postgres:// server URL (default: DATABASE_URL, else the local one)")
    args = parser.parse_args(argv)
    import psycopg

    server = postgres_server_url(args.database_url)
    name = f"silvia_bench_sizes_{os.getpid()}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    scratch = Path(tempfile.mkdtemp(prefix="silvia-bench-sizes-"))
    os.environ.update(
        {
            "DATABASE_URL": server.rsplit("/", 1)[0] + "/" + name,
            "DJANGO_SETTINGS_MODULE": "silvia.settings",
            "DJANGO_LOG_LEVEL": "WARNING",
        }
    )
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-key-never-used-to-serve-Sz4Kq8Tn2Wr6Lp0Xm3Vd7Hc1")
    try:
        subprocess.check_call([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=ROOT)
        import django

        django.setup()
        return run(args, scratch)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            for role in (f"{name}_sql_reader", f"{name}_sql_views"):
                conn.execute(f'DROP ROLE IF EXISTS "{role}"')
        shutil.rmtree(scratch, ignore_errors=True)


def run(args: argparse.Namespace, scratch: Path) -> int:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from rest_framework.authtoken.models import Token

    from bench.live_turns import Stream, _run_streams, answer_script
    from chat.models import ChatLog
    from devtools.recorded_model import RecordedModelServer
    from tests.procfile import Stack, embedded_env, rabbitmq_available, rabbitmq_env

    users = get_user_model().objects.bulk_create(get_user_model()(username=f"size{i:04d}") for i in range(args.turns))
    tokens = [Token.objects.create(user=user).key for user in users]
    model = RecordedModelServer([answer_script(20.0)]).start()
    rabbit = rabbitmq_available()
    env = {
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": "bench",
        "LIVE_TURN_THROTTLE_RATE": "1000/minute",
        **(rabbitmq_env() if rabbit else embedded_env(scratch / "broker")),
    }
    stack = Stack(env, scratch)
    try:
        stream = stack.stream()
        stack.worker()
        before = sizes()
        streams = [Stream(stream.port, token) for token in tokens]
        for start in range(0, len(streams), args.at_once):
            _run_streams(streams[start : start + args.at_once])
        failed = sum(not s.ok for s in streams)
        written = sizes()
        with connection.cursor() as cursor:
            cursor.execute("VACUUM")
        vacuumed = sizes()
    finally:
        stack.close()
        model.stop()
    turns = len(streams) - failed
    answer = ChatLog.objects.order_by("created_at").first()
    print(
        f"{turns} turns stored ({failed} failed), {args.at_once} at once; broker: "
        f"{'RabbitMQ' if rabbit else 'embedded'}; an answer of {len(answer.response) if answer else 0} characters, "
        f"{len(answer.inline_citations) if answer else 0} inline citations"
    )
    print(f"{'table':<34} {'rows/turn':>10} {'bytes/turn':>11} {'after VACUUM':>13}")
    for table, (rows, size) in written.items():
        rows_added, bytes_added = rows - before[table][0], size - before[table][1]
        if not rows_added and not bytes_added:
            continue
        after = vacuumed[table][1] - before[table][1]
        print(f"{table:<34} {rows_added / turns:>10.2f} {bytes_added / turns:>11,.0f} {after / turns:>13,.0f}")
    total = sum(size for _, size in written.values()) - sum(size for _, size in before.values())
    print(f"{'all tables':<34} {'':>10} {total / turns:>11,.0f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
