"""Benchmark: the retention pass pruning a million events while turns run, with the GET p99 beside it (issue 39).

    .venv/bin/python bench/retention.py                       # 10,000 ended turns x 100 events: a million
    .venv/bin/python bench/retention.py --turns 50 --seconds 3  # a smoke run

One scratch PostgreSQL database (`--database-url` as the other benchmarks)
holds maya's session of 100 turns (what is read) and `--turns` ended live turns
of `--events` events each, two days old (what is pruned), loaded with COPY.
While it runs, `--writers` threads play running turns: each appends a batch of
5 events every 50 ms to a turn of its own (the worker's write, `live.db`'s
statement: a conditional UPDATE of the turn and the INSERT, one transaction),
and counts the batches that waited more than 100 ms.

The product is the Procfile's `web:` process (gunicorn, one worker). One
client GETs the session over a kept-alive connection, for `--seconds` in each
of three windows: before the pass (baseline), during it (`manage.py shell`
running `silvia.retention.retention_pass`, batches of `RETENTION_BATCH_SIZE`),
and after. It prints each window's GET p50 and p99, p99 during over the
baseline's (goal <= 2), the pass's time and rows per second, and the writers'
slowest batch in each window. Nothing here runs at the same time as another
benchmark: the lead runs the full size on a quiet machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from bench._http import WEB, Server, django_env, scratch_postgres  # noqa: E402
from bench._load import add_user, copy_logs, copy_sessions, migrate, vacuum  # noqa: E402
from bench._timing import postgres_server_url  # noqa: E402

GOAL_P99 = 2.0


def load(conninfo: str, turns: int, events: int) -> tuple[str, uuid.UUID, int]:
    """maya's session of 100 turns and `turns` ended turns of `events` events; (token, session id, user id)."""
    now = dt.datetime.now(dt.UTC)
    old = now - dt.timedelta(days=2)
    session_id = uuid.uuid4()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        user_id, key = add_user(conn, "maya")
        copy_sessions(conn, [(session_id, user_id, "Benchmark", now, now)])
        citation = {"source": "silvia://your-portfolio", "title": "Your portfolio", "cited_text": "total: 1000"}
        copy_logs(
            conn,
            (
                {
                    "id": uuid.uuid4(),
                    "session_id": session_id,
                    "user_id": user_id,
                    "user_message": f"Question {n}?",
                    "response": "Your portfolio is worth $1,000. " * 10,
                    "citations": [{**citation, "target": {"kind": "portfolio"}}],
                    "inline_citations": [{**citation, "start": 0, "end": 10, "target": {"kind": "portfolio"}}],
                    "prompt_version": "v5",
                    "model": "bench",
                    "created_at": now - dt.timedelta(minutes=100 - n),
                }
                for n in range(100)
            ),
        )
        ids = [uuid.uuid4() for _ in range(turns)]
        columns = "id, session_id, user_id, user_message, prompt_version, status, last_seq, worker_token, task_id, "
        columns += "resume_count, stop_reason, created_at, started_at, progressed_at, finished_at"
        with conn.cursor().copy(f"COPY chat_live_turns ({columns}) FROM STDIN") as copy:
            for turn_id in ids:
                copy.write_row(
                    (turn_id, uuid.uuid4(), user_id, "q", "v5", "done", events, uuid.uuid4(), uuid.uuid4(), 0,
                     "end_turn", old, old, old, old)
                )  # fmt: skip
        with conn.cursor().copy("COPY chat_live_turn_events (turn_id, seq, event, data) FROM STDIN") as copy:
            for turn_id in ids:
                for seq in range(1, events + 1):
                    copy.write_row((turn_id, seq, "text", '{"text":"Some words of an answer, streamed."}'))
    return key, session_id, user_id


class Writers:
    """`count` threads, each a running turn appending 5 events every 50 ms; the slowest batch per window."""

    def __init__(self, conninfo: str, user_id: int, count: int) -> None:
        self.conninfo, self.user_id, self.count = conninfo, user_id, count
        self.stop = threading.Event()
        self.slowest = 0.0
        self.batches = 0
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(count)]

    def window(self) -> tuple[float, int]:
        slowest, batches, self.slowest, self.batches = self.slowest, self.batches, 0.0, 0
        return slowest, batches

    def run(self) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            turn_id, token, seq = uuid.uuid4(), uuid.uuid4(), 0
            now = dt.datetime.now(dt.UTC)
            conn.execute(
                "INSERT INTO chat_live_turns (id, session_id, user_id, user_message, prompt_version, status, "
                "last_seq, worker_token, task_id, resume_count, stop_reason, created_at) "
                "VALUES (%s, %s, %s, 'q', 'v5', 'running', 0, %s, %s, 0, '', %s)",
                [turn_id, uuid.uuid4(), self.user_id, token, uuid.uuid4(), now],
            )
            while not self.stop.is_set():
                started = time.perf_counter()
                with conn.transaction():
                    conn.execute(
                        "UPDATE chat_live_turns SET last_seq = %s, progressed_at = now() "
                        "WHERE id = %s AND worker_token = %s AND status = 'running' AND last_seq = %s",
                        [seq + 5, turn_id, token, seq],
                    )
                    with conn.cursor().copy("COPY chat_live_turn_events (turn_id, seq, event, data) FROM STDIN") as c:
                        for n in range(seq + 1, seq + 6):
                            c.write_row((turn_id, n, "text", '{"text":"more"}'))
                seq += 5
                took = time.perf_counter() - started
                self.slowest, self.batches = max(self.slowest, took), self.batches + 1
                time.sleep(max(0.0, 0.05 - took))

    def __enter__(self) -> Writers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)


def gets(client: Any, path: str, until: float | threading.Event) -> list[float]:
    """GET `path` until the time `until` (monotonic) or the event is set; each GET's seconds."""
    times = []
    while not (until.is_set() if isinstance(until, threading.Event) else time.monotonic() >= until):
        started = time.perf_counter()
        client.get(path)
        times.append(time.perf_counter() - started)
    return times


def p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) >= 2 else (values or [0.0])[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()

    server_url = postgres_server_url(args.database_url)
    with scratch_postgres(server_url, "retention") as (conninfo, django_url):
        migrate(django_url)
        key, session_id, user_id = load(conninfo, args.turns, args.events)
        vacuum(conninfo)
        total = args.turns * args.events
        print(f"retention: {args.turns:,} ended turns x {args.events} events = {total:,} events to prune; "
              f"{args.writers} running turns writing; batches of {args.batch_size}")  # fmt: skip
        path = f"/api/chat/sessions/{session_id}/"
        broker = tempfile.mkdtemp(prefix="silvia-bench-broker-")  # the pass prunes an embedded broker: its own
        env = {**django_env(django_url), "RETENTION_BATCH_SIZE": str(args.batch_size), "CELERY_BROKER_DIR": broker}
        with Server(WEB, django_env(django_url)) as web, Writers(conninfo, user_id, args.writers) as writers:
            client = web.client({"Authorization": f"Token {key}"})
            gets(client, path, time.monotonic() + 1)  # warm up
            writers.window()
            windows: dict[str, tuple[list[float], tuple[float, int]]] = {}
            windows["before"] = (gets(client, path, time.monotonic() + args.seconds), writers.window())
            done = threading.Event()
            outcome: dict[str, Any] = {}

            def prune() -> None:
                started = time.perf_counter()
                code = "from silvia.retention import retention_pass; print(retention_pass())"
                ran = subprocess.run(
                    [sys.executable, "manage.py", "shell", "-c", code],
                    cwd=ROOT, env=env, capture_output=True, text=True,
                )  # fmt: skip
                outcome.update(seconds=time.perf_counter() - started, out=ran.stdout.strip(), err=ran.stderr[-500:])
                done.set()

            threading.Thread(target=prune, daemon=True).start()
            windows["during"] = (gets(client, path, done), writers.window())
            windows["after"] = (gets(client, path, time.monotonic() + args.seconds), writers.window())
        with psycopg.connect(conninfo) as conn:
            (left,) = conn.execute(
                "SELECT count(*) FROM chat_live_turn_events e JOIN chat_live_turns t ON t.id = e.turn_id "
                "WHERE t.status = 'done'"
            ).fetchone() or (0,)
        print(f"  pass: {outcome['seconds']:.1f} s, {total / outcome['seconds']:,.0f} events/s; events left {left}")
        print(f"  {(outcome['out'] or outcome['err']).splitlines()[-1]}")
        for name, (times, (slowest, batches)) in windows.items():
            print(f"  {name:>6}: GET p50 {p(times, 50) * 1000:.1f} ms, p99 {p(times, 99) * 1000:.1f} ms "
                  f"({len(times)} GETs); writers' slowest batch {slowest * 1000:.0f} ms of {batches}")  # fmt: skip
        ratio = p(windows["during"][0], 99) / max(p(windows["before"][0], 99), 1e-9)
        print(
            f"  GET p99 during / before {ratio:.2f} (goal <= {GOAL_P99}: {'met' if ratio <= GOAL_P99 else 'NOT MET'})"
        )


if __name__ == "__main__":
    main()
