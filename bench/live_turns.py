"""Benchmark: live turns over HTTP against the Procfile's processes (issues 8, 10, 18 and 30).

    .venv/bin/python bench/live_turns.py                          # PostgreSQL + RabbitMQ: 1, 20 and 100 turns
    .venv/bin/python bench/live_turns.py --levels 20 --sqlite     # the embedded default: SQLite + the embedded broker
    .venv/bin/python bench/live_turns.py --streams 2 --workers 2 --concurrency 50 --rounds 5

Setup: a scratch database (`silvia_bench_live_<pid>` on the PostgreSQL
server of `--database-url`, dropped at the end; or a SQLite file with
`--sqlite`), migrated; the recorded model in this process (`--delay-ms`
between stream events, one tool round per turn so a checkpoint is written);
`--streams` processes of the Procfile's `stream:` line (uvicorn: the turns'
POSTs, as a proxy routes them), one of its `web:` line (gunicorn: the plain
GETs) and `--workers` of its `worker:` line (`--concurrency` threads each),
on RabbitMQ with a queue of the run's own when it answers (else, and with
`--sqlite`, the embedded broker). One user per concurrent turn,
each turn in a new session.

Figures, each beside its baseline from the same run, levels alternating
over `--rounds` rounds (median and range of the rounds' medians):

- **time to first event** (POST -> `turn`) and **time to `done`**, at each
  level; baseline: a single turn (level 1). Goal: `done` at 100 <= 1.5x;
- **errors**: a status other than 200, or a stream that does not end `done`;
- **GET p99 under load**: `GET /api/chat/sessions/<id>` of another session
  (on the web process) while the turns stream, against the same GET between
  rounds (idle), from a process of its own (`bench/_get_probe.py`: a
  person's browser shares no GIL with the load's clients; before stop 45
  a thread of this process). Goal <= 3x;
- **CPU per turn**: the stream, web and worker processes' and PostgreSQL's
  backends' CPU seconds over a level, per turn. Goal <= 25 ms at 100;
- **kill-to-resumed** (RabbitMQ only): `--kill-turns` turns running, one
  worker SIGKILLed; for each turn it ran, the kill -> the next event its
  client reads (goal <= 30 s), and every turn ends `done`.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._get_probe import get  # noqa: E402
from bench._timing import postgres_server_url  # noqa: E402


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile: always a measured value."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered)) - 1))] if ordered else float("nan")


def ms(value: float) -> str:
    return f"{value * 1000:8.1f} ms"


def answer_script(delay_ms: float) -> dict[str, Any]:
    """One tool round, then a cited answer of about 50 text events."""
    cite = {
        "type": "search_result_location",
        "source": "silvia://credit-card-corpus/chase/sapphire-preferred/pricing.md",
        "title": "Sapphire Preferred pricing and terms",
        "cited_text": "fee",
        "search_result_index": 0,
        "start_block_index": 0,
        "end_block_index": 1,
    }
    sentence = "Your card's annual fee is $95, and purchases cost 20.24% to 27.24% a year. "
    tool = {"type": "tool_use", "id": "toolu_b1", "name": "read_credit_card_document"}
    return {
        "name": "bench",
        "delay_ms": delay_ms,
        "steps": [
            {
                "message": {
                    "stop_reason": "tool_use",
                    "content": [{**tool, "input": {"path": "chase/sapphire-preferred/pricing.md"}}],
                }
            },
            {
                "message": {
                    "stop_reason": "end_turn",
                    "content": [
                        {"type": "text", "text": sentence * 4, "citations": [cite]},
                        {"type": "text", "text": sentence * 4},
                    ],
                }
            },
        ],
    }


class Stream:
    """One turn's SSE response read on a thread: the receipt time, id, name and data of each event.

    `run()` POSTs the turn; a stream cut off (its server killed) reconnects with `resume(port)`, from the
    last id it read (`Last-Event-ID`), as a client does. `answer()` is the text it holds, each `rewind`
    applied. `come_back`: a POST refused with `503` is sent again after its `Retry-After` (at most 1 s here),
    as the AI SDK's clients and ask.js do, up to 30 times (the setup of bench/live_streams.py); without it a
    refusal is the stream's end (what a level of this bench counts as an error)."""

    def __init__(self, port: int, token: str, *, come_back: bool = False) -> None:
        self.port, self.token, self.come_back = port, token, come_back
        self.status = 0
        self.events: list[tuple[float, str, Any]] = []
        self.ids: list[int] = []
        self.started = 0.0
        self.detail = ""  # a refusal's detail
        self.refusals = 0  # 503s it came back after (`come_back`)

    def run(self) -> None:
        self.started = time.perf_counter()
        body = json.dumps({"message": "fees?"})
        for _ in range(30 if self.come_back else 1):
            self._read("POST", f"/api/chat/sessions/{uuid.uuid4()}/turns/", body, {})
            if self.status != 503:
                break
            self.refusals += 1
            time.sleep(1.0)

    def resume(self, port: int) -> None:
        self.port = port
        turn_id = self.events[0][2]["turn_id"]
        self._read("GET", f"/api/chat/turns/{turn_id}/events", None, {"Last-Event-ID": str(self.ids[-1])})

    def _read(self, method: str, path: str, body: str | None, extra: dict[str, str]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        headers = {"Authorization": f"Token {self.token}", "Content-Type": "application/json", **extra}
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            self.status = response.status
            if self.status != 200:
                self.detail = str(json.loads(response.read() or b"{}").get("detail", ""))[:60]
            name, seq = None, 0
            while self.status == 200:
                line = response.readline()
                if not line:
                    break
                if line.startswith(b"id: "):
                    seq = int(line[4:])
                elif line.startswith(b"event: "):
                    name = line[7:].strip().decode()
                elif line.startswith(b"data: ") and name:
                    self.events.append((time.perf_counter(), name, json.loads(line[6:])))
                    self.ids.append(seq)
                    if name in ("done", "error"):
                        break
        except (OSError, http.client.HTTPException):
            self.status = -1
        finally:
            conn.close()

    @property
    def ok(self) -> bool:
        return self.status == 200 and bool(self.events) and self.events[-1][1] == "done"

    def answer(self) -> str:
        text: list[tuple[int, str]] = []
        for seq, (_, name, data) in zip(self.ids, self.events, strict=True):
            if name == "rewind":
                text = [(i, t) for i, t in text if i <= data["to"]]
            elif name == "text":
                text.append((seq, data["text"]))
        return "".join(t for _, t in text)


_get = get  # one GET, timed (bench._get_probe's, run here in the bench's process)


class GetProbe:
    """`bench/_get_probe.py` in a process of its own: GETs timed outside the bench's process (see there)."""

    def __init__(self, port: int, path: str, token: str) -> None:
        self.argv = [sys.executable, str(Path(__file__).with_name("_get_probe.py")), str(port), path, token]
        self.running: subprocess.Popen[str] | None = None

    def times(self, count: int) -> list[float]:
        """`count` GETs one after another, their times in seconds."""
        done = subprocess.run([*self.argv, "--count", str(count)], capture_output=True, text=True, check=True)
        return json.loads(done.stdout)

    def start(self) -> None:
        """A GET every 50 ms from now until `stop`."""
        self.running = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def stop(self) -> list[float]:
        """The times of the GETs since `start`."""
        assert self.running is not None
        out, _ = self.running.communicate("", timeout=120)
        if self.running.returncode:
            raise RuntimeError(f"the GET probe failed ({self.running.returncode})")
        self.running = None
        return json.loads(out)


class CpuMeter:
    """CPU seconds (user + system) spent by each kind of process: this bench, the webs, the workers, PostgreSQL.

    Read from `/proc/<pid>/stat` (Linux; elsewhere nothing is reported). This
    process is the harness: the clients and the recorded model, which stand
    for remote browsers and a remote API, so their CPU is not the service's.
    PostgreSQL is the backends connected to the scratch database, found in
    `pg_stat_activity` at each reading (pooled connections outlive a level).
    """

    def __init__(self, streams: list[Any], webs: list[Any], workers: list[Any], postgres: bool) -> None:
        self.groups = {
            "stream": [s.process.pid for s in streams],
            "web": [pid for w in webs for pid in process_tree(w.process.pid)],
            "worker": [w.process.pid for w in workers],
        }
        self.postgres = postgres
        self.available = Path("/proc/self/stat").exists()

    def _pid_cpu(self, pid: int) -> float:
        return process_cpu_seconds(pid)

    def read(self) -> dict[str, Any]:
        """Per kind, `{pid: CPU seconds}` now (PostgreSQL's backends of the scratch database)."""
        if not self.available:
            return {}
        readings = {kind: {pid: self._pid_cpu(pid) for pid in pids} for kind, pids in self.groups.items()}
        times = os.times()
        readings["bench"] = {os.getpid(): times.user + times.system}
        if self.postgres:
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
                readings["postgres"] = {pid: self._pid_cpu(pid) for (pid,) in cursor.fetchall()}
        return readings

    @staticmethod
    def spent(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
        """CPU seconds per kind between two readings (a backend that started meanwhile counts from 0)."""
        return {
            kind: sum(cpu - before.get(kind, {}).get(pid, 0.0) for pid, cpu in pids.items())
            for kind, pids in after.items()
        }


def process_cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user + system, seconds) from `/proc/<pid>/stat`; 0 once it has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """`pid` and its children (gunicorn's master and its worker processes)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    found = [pid]
    if children.exists():
        for child in children.read_text().split():
            found += process_tree(int(child))
    return found


def _run_streams(streams: list[Stream]) -> None:
    threads = [threading.Thread(target=s.run) for s in streams]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)


@contextlib.contextmanager
def scratch_database(server_url: str, kind: str) -> Iterator[str]:
    """A scratch PostgreSQL database (`bench._scratch`), migrated, this process's Django set up on it; yields
    a scratch folder (the processes' logs, the embedded broker). All dropped at the end."""
    from bench._scratch import scratch_postgres

    folder = Path(tempfile.mkdtemp(prefix=f"silvia-bench-{kind}-"))
    try:
        with scratch_postgres(server_url, kind) as (_conninfo, database_url):
            os.environ.update(
                {
                    "DATABASE_URL": database_url,
                    "DJANGO_SETTINGS_MODULE": "silvia.settings",
                    "DJANGO_LOG_LEVEL": "WARNING",
                }
            )
            os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-key-never-used-to-serve-Lv7Tq2Np9Xr4Hm6Zc1Wd8Gs3")
            import subprocess

            subprocess.check_call([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=ROOT)
            import django
            from django.db import connections

            django.setup()
            try:
                yield str(folder)
            finally:
                connections.close_all()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 20, 100], help="concurrent turns")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--delay-ms", type=float, default=20.0, help="recorded model pacing between events")
    parser.add_argument("--streams", type=int, default=1, help="stream processes (uvicorn) the POSTs go to")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=50, help="threads per worker (CELERY_WORKER_CONCURRENCY)")
    parser.add_argument("--kill-turns", type=int, default=20, help="turns running when a worker is killed (0: skip)")
    parser.add_argument(
        "--come-back",
        action="store_true",
        help="a POST refused with 503 is sent again after 1 s, as clients do (else a refusal is an error)",
    )
    parser.add_argument("--database-url", help="a postgres:// server URL (default: DATABASE_URL, else the local one)")
    parser.add_argument("--sqlite", action="store_true", help="SQLite and the embedded broker")
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="silvia-bench-live-"))
    pg_admin = None
    if args.sqlite:
        database_url = f"sqlite:///{scratch}/bench.sqlite3"
    else:
        import psycopg

        server = postgres_server_url(args.database_url)
        name = f"silvia_bench_live_{os.getpid()}"
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        pg_admin = (server, name)
        database_url = server.rsplit("/", 1)[0] + "/" + name
    os.environ.update(
        {"DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "silvia.settings", "DJANGO_LOG_LEVEL": "WARNING"}
    )
    # Run on its own too (bench/README.md), not only from `make bench`, which sets a key.
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-key-never-used-to-serve-Lv7Tq2Np9Xr4Hm6Zc1Wd8Gs3")
    django_ready = False
    try:
        import subprocess

        subprocess.check_call([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=ROOT)
        import django

        django.setup()
        django_ready = True
        return run(args, database_url, scratch)
    finally:
        if pg_admin is not None:
            if django_ready:  # else loading Django's connections could fail here too, and leave the database
                from django.db import connections

                connections.close_all()
            import psycopg

            with psycopg.connect(pg_admin[0], autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {pg_admin[1]} WITH (FORCE)")
                # Migration 0002's roles are the database's (docs/sql-tool.md): drop them with it.
                for role in (f"{pg_admin[1]}_sql_reader", f"{pg_admin[1]}_sql_views"):
                    conn.execute(f'DROP ROLE IF EXISTS "{role}"')
        shutil.rmtree(scratch, ignore_errors=True)


def run(args: argparse.Namespace, database_url: str, scratch: Path) -> int:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from chat.models import ChatLog, ChatSession
    from devtools.recorded_model import RecordedModelServer
    from live.models import LiveTurn
    from tests.procfile import Stack, embedded_env, rabbitmq_available, rabbitmq_env

    users = get_user_model().objects.bulk_create(
        get_user_model()(username=f"bench{i:03d}") for i in range(max(max(args.levels), args.kill_turns))
    )
    tokens = [Token.objects.create(user=user).key for user in users]
    other = ChatSession.objects.create(user=users[0], title="other")
    ChatLog.objects.bulk_create(
        ChatLog(session=other, user=users[0], user_message=f"q{i}", response="a" * 400, prompt_version="v5")
        for i in range(20)
    )
    get_path = f"/api/chat/sessions/{other.id}/"
    model = RecordedModelServer([answer_script(args.delay_ms)]).start()
    rabbit = not args.sqlite and rabbitmq_available()
    broker = rabbitmq_env() if rabbit else embedded_env(scratch / "broker")
    env = {
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": "bench",
        "DJANGO_LOG_LEVEL": "WARNING",
        "CELERY_WORKER_CONCURRENCY": str(args.concurrency),
        "LIVE_TURN_THROTTLE_RATE": "1000/minute",
        **broker,
    }
    stack = Stack(env, scratch)
    try:
        streams_ = [stack.stream() for _ in range(args.streams)]
        web = stack.web()
        workers = [stack.worker() for _ in range(args.workers)]
        print(
            f"database: {'SQLite' if args.sqlite else 'PostgreSQL'}; broker: "
            f"{'RabbitMQ' if rabbit else 'embedded'}; {args.streams} stream + 1 web + {args.workers} "
            f"worker processes ({args.concurrency} threads each); pacing {args.delay_ms:g} ms/event; "
            f"{args.rounds} rounds",
            flush=True,
        )
        _run_streams([Stream(s.port, tokens[0]) for s in streams_])  # warm-up: imports, connections
        for _ in range(20):
            _get(web.port, get_path, tokens[0])  # and gunicorn's worker processes

        first: dict[int, list[float]] = {n: [] for n in args.levels}
        done: dict[int, list[float]] = {n: [] for n in args.levels}
        errors: dict[int, int] = dict.fromkeys(args.levels, 0)
        error_kinds: dict[str, int] = {}
        refused: dict[int, int] = dict.fromkeys(args.levels, 0)
        events_read: dict[int, list[float]] = {n: [] for n in args.levels}  # text merged per batch: fewer under load
        idle: list[float] = []  # the GETs from a process of their own (bench/_get_probe.py)
        loaded: list[float] = []
        get_probe = GetProbe(web.port, get_path, tokens[0])
        meter = CpuMeter(streams_, [web], workers, postgres=not args.sqlite)
        cpu: dict[int, dict[str, float]] = {n: {} for n in args.levels}
        for round_index in range(args.rounds):
            for level in args.levels:
                idle.extend(get_probe.times(20))
                streams = [
                    Stream(streams_[i % len(streams_)].port, tokens[i], come_back=args.come_back) for i in range(level)
                ]
                get_probe.start()
                before = meter.read()
                _run_streams(streams)
                spent = meter.spent(before, meter.read())
                loaded.extend(get_probe.stop())
                for kind, seconds in spent.items():
                    cpu[level][kind] = cpu[level].get(kind, 0.0) + seconds
                ok = [s for s in streams if s.ok]
                errors[level] += len(streams) - len(ok)
                refused[level] += sum(s.refusals for s in streams)
                for s in streams:
                    if not s.ok:  # what went wrong, by kind: the status, or the last event and its error type
                        last = s.events[-1] if s.events else None
                        kind = f"{s.status} {last[1] if last else s.detail or 'no event'}"
                        if last is not None and last[1] == "error":
                            kind += f" {last[2].get('error', {}).get('type')}"
                        error_kinds[kind] = error_kinds.get(kind, 0) + 1
                if ok:
                    events_read[level].append(statistics.mean(len(s.events) for s in ok))
                    first[level].append(statistics.median(s.events[0][0] - s.started for s in ok))
                    done[level].append(statistics.median(s.events[-1][0] - s.started for s in ok))
            print(f"  round {round_index + 1}: " + ", ".join(f"{n}: {ms(done[n][-1]).strip()}" for n in args.levels))

        single = statistics.median(done[min(args.levels)])
        print(
            f"\n{'turns':>6} {'first event (median, range)':>32} {'done (median, range)':>34} {'vs single':>10} errors"
        )
        for level in args.levels:
            f, d = first[level], done[level]
            print(
                f"{level:>6} {ms(statistics.median(f))} ({ms(min(f)).strip()}-{ms(max(f)).strip()}) "
                f"{ms(statistics.median(d))} ({ms(min(d)).strip()}-{ms(max(d)).strip()}) "
                f"{statistics.median(d) / single:>9.2f}x {errors[level]:>5}"
            )
        if any(cpu.values()):
            kinds = ("worker", "stream", "web", "postgres")
            print(
                f"\nCPU ms per turn {'':>5} "
                + " ".join(f"{k:>9}" for k in (*kinds, "service", "bench"))
                + "   (service: the four; goal <= 25 at 100; bench: clients + model)"
            )
            for level in args.levels:
                turns = level * args.rounds
                per = {k: cpu[level].get(k, 0.0) * 1000 / turns for k in (*kinds, "bench")}
                service = sum(per[k] for k in kinds)
                print(
                    f"{level:>20} " + " ".join(f"{per[k]:9.1f}" for k in kinds) + f" {service:9.1f} {per['bench']:9.1f}"
                )
        idle_p99, load_p99 = pct(idle, 0.99), pct(loaded, 0.99)
        print(
            f"GET another session (a probe process): idle p99 {ms(idle_p99)} ({len(idle)}), under load p99 "
            f"{ms(load_p99)} ({len(loaded)}); ratio {load_p99 / idle_p99:.2f} (goal <= 3)"
        )
        pool_timeouts = stack.logs().count("PoolTimeout")
        print(f"PoolTimeout in the processes' logs: {pool_timeouts}")
        print(
            "events a client read per turn (batches merge text): "
            + ", ".join(f"{n}: {statistics.mean(v):.1f}" for n, v in events_read.items() if v)
        )
        if args.come_back:
            print("POSTs refused with 503 and sent again (their `done` includes the wait): " + str(refused))
        if error_kinds:
            print("errors by kind: " + ", ".join(f"{kind} x{count}" for kind, count in sorted(error_kinds.items())))

        failed = sum(errors.values()) + pool_timeouts
        if args.kill_turns and rabbit and len(workers) > 1:
            failed += _kill_to_resumed(args, streams_, workers, tokens, model)
        elif args.kill_turns:
            print("kill-to-resumed: skipped (needs RabbitMQ and two workers; the embedded broker has no redelivery)")
        if args.kill_turns and len(streams_) > 1:
            failed += _kill_stream(args, streams_, tokens, model)
        elif args.kill_turns:
            print("stream process killed: skipped (needs two stream processes: --streams 2)")
        print(f"live turns in the database: {LiveTurn.objects.count()}")
        return 1 if failed else 0
    finally:
        stack.close()
        model.stop()


def _held(streams: list[Stream]) -> tuple[int, int]:
    """(turns lost, turns whose client does not hold the stored row): a client applying `rewind` holds
    exactly its turn's stored answer, and each turn is stored once (its row's id is the turn's)."""
    from chat.models import ChatLog

    turn_ids = [uuid.UUID(s.events[0][2]["turn_id"]) for s in streams if s.events]
    stored = dict(ChatLog.objects.filter(pk__in=turn_ids).values_list("pk", "response"))
    lost = len(streams) - len(stored)
    differ = sum(1 for s in streams if s.events and stored.get(uuid.UUID(s.events[0][2]["turn_id"])) != s.answer())
    return lost, differ


def _kill_to_resumed(args, servers, workers, tokens, model) -> int:
    """A worker SIGKILLed mid-turn: RabbitMQ gives its turns to the other worker; their clients read on."""
    from live.models import LiveTurn, LiveTurnStatus

    model.load([answer_script(max(args.delay_ms, 100.0))])  # turns long enough to be caught running
    requests_before = len(model.requests)
    streams = [Stream(servers[i % len(servers)].port, tokens[i]) for i in range(args.kill_turns)]
    threads = [threading.Thread(target=s.run) for s in streams]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 120
    while LiveTurn.objects.filter(status=LiveTurnStatus.RUNNING).count() < min(args.kill_turns, args.concurrency):
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    time.sleep(1.0)  # mid-answer
    killed_at = time.perf_counter()
    workers[0].kill()
    for thread in threads:
        thread.join(600)
    resumed = set(LiveTurn.objects.filter(resume_count__gt=0).values_list("pk", flat=True))
    gaps = []
    for stream in streams:
        if stream.events and uuid.UUID(stream.events[0][2]["turn_id"]) in resumed:
            after = [t for t, _, _ in stream.events if t > killed_at]
            if after:
                gaps.append(after[0] - killed_at)
    bad = sum(1 for s in streams if not s.ok)
    lost, differ = _held(streams)
    extra = len(model.requests) - requests_before - 2 * len(streams)  # two model steps a turn
    print(
        f"worker killed: {len(resumed)} of {len(streams)} turns ran on it; kill -> their next event "
        + (f"median {ms(statistics.median(gaps))}, max {ms(max(gaps))}" if gaps else "(none ran on it)")
        + f" (goal <= 30 s); not done {bad}, lost {lost}, client != stored {differ}; model requests beyond "
        f"2 a turn: {extra} for {len(resumed)} resumed (goal: at most one more each)"
    )
    model.load([answer_script(args.delay_ms)])
    return bad + lost + differ + max(0, extra - len(resumed))


def _kill_stream(args, servers, tokens, model) -> int:
    """A stream process SIGKILLed mid-turn: its clients reconnect to another with `Last-Event-ID`."""
    model.load([answer_script(max(args.delay_ms, 100.0))])
    requests_before = len(model.requests)
    streams = [Stream(servers[0].port, tokens[i]) for i in range(args.kill_turns)]
    threads = [threading.Thread(target=s.run) for s in streams]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 120
    while sum(1 for s in streams if len(s.events) > 3) < len(streams) and time.monotonic() < deadline:
        time.sleep(0.02)
    servers[0].kill()
    for thread in threads:
        thread.join(600)
    cut = [s for s in streams if not s.ok]
    reconnects = [threading.Thread(target=s.resume, args=(servers[1].port,)) for s in cut]
    for thread in reconnects:
        thread.start()
    for thread in reconnects:
        thread.join(600)
    bad = sum(1 for s in streams if not s.ok)
    lost, differ = _held(streams)
    extra = len(model.requests) - requests_before - 2 * len(streams)
    print(
        f"stream process killed: {len(cut)} of {len(streams)} clients cut off, reconnected to another with "
        f"Last-Event-ID; not done {bad}, lost {lost}, client != stored {differ}; model requests beyond 2 a turn: "
        f"{extra} (goal 0: the turns ran on on their workers)"
    )
    model.load([answer_script(args.delay_ms)])
    return bad + lost + differ + max(0, extra)


if __name__ == "__main__":
    sys.exit(main())
