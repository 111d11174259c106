"""Benchmark: what one request costs the stream process (uvicorn), against the same request on the web process
(gunicorn), over HTTP against the Procfile's processes (issue 36).

    .venv/bin/python bench/stream_opens.py                 # 300 requests a kind, 5 rounds, PostgreSQL
    .venv/bin/python bench/stream_opens.py --requests 1000 --rounds 7

Setup: a scratch PostgreSQL database (dropped at the end), one process of
the Procfile's `stream:` line, one of its `web:` line and one `worker:` on
the embedded broker (for the one finished turn), the recorded model in this
process. Requests one after another, each on a new connection (as a
browser's reconnecting EventSource opens one), `Authorization: Token`:

- **404**: `GET /api/chat/turns/<unknown id>/events`: the request's
  machinery, the token's query and the turn's lookup, nothing streamed;
- **replay**: `GET /api/chat/turns/<finished turn>/events` with
  `Last-Event-ID: 0`: a stream opened, the turn's 27 events read and sent to
  its `done` (on the stream process a direct open, `live.direct`, sent on
  the event loop; on the web process through Django, from its thread);
- **session**: `GET /api/chat/sessions/<id>/` of a 20-turn session: a plain
  API read, the same view on both.

Figure: the server's CPU (user + system of its process and its children,
from `/proc`) per request, median over rounds and its range; in each round the
two servers run the same requests, their order flipping from one round to
the next, and the ratio stream / web is per round. The web process is the
baseline: the same request, the same view and queries, under WSGI. One
stream process opening 1,000 streams at once spends 1,000 times the
replay's figure before the last one has its first event (`live_streams.py`).
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._timing import postgres_server_url  # noqa: E402
from bench.live_turns import answer_script, process_cpu_seconds, process_tree, scratch_database  # noqa: E402


def tree_cpu_seconds(pid: int) -> float:
    """CPU time (user + system, seconds) of a server: its process and its children (gunicorn's workers)."""
    return sum(process_cpu_seconds(each) for each in process_tree(pid))


def request(port: int, path: str, token: str) -> tuple[int, int]:
    """One GET on a new connection, read to its end: its status and body length."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path, headers={"Authorization": f"Token {token}", "Last-Event-ID": "0"})
        response = conn.getresponse()
        return response.status, len(response.read())
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="requests of each kind per server and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--database-url", help="a postgres:// server URL (default: DATABASE_URL, else the local one)")
    args = parser.parse_args(argv)
    with scratch_database(postgres_server_url(args.database_url), "opens") as scratch:
        return run(args, Path(scratch))


def run(args: argparse.Namespace, scratch: Path) -> int:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from bench.live_streams import _turns
    from chat.models import ChatLog, ChatSession
    from devtools.recorded_model import RecordedModelServer
    from tests.procfile import Stack, embedded_env

    users = get_user_model().objects.bulk_create(get_user_model()(username=f"o{i}") for i in range(2))
    tokens = [Token.objects.create(user=user).key for user in users]
    session = ChatSession.objects.create(user=users[0], title="read")
    ChatLog.objects.bulk_create(
        ChatLog(session=session, user=users[0], user_message=f"q{i}", response="a" * 400, prompt_version="v5")
        for i in range(20)
    )
    model = RecordedModelServer([answer_script(5.0)]).start()
    env = {
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": "bench",
        "DJANGO_LOG_LEVEL": "WARNING",
        "LIVE_SSE_MAX_STREAMS_PER_USER": "1000",
        **embedded_env(scratch),
    }
    stack = Stack(env, scratch)
    try:
        servers = {"stream": stack.stream(), "web": stack.web()}
        stack.worker()
        finished = _turns(servers["stream"].port, tokens[1:2])
        if not finished:
            raise RuntimeError("the finished turn did not finish")
        kinds = {
            "404": (f"/api/chat/turns/{uuid.uuid4()}/events", tokens[1], 404),
            "replay": (f"/api/chat/turns/{finished[0]}/events", tokens[1], 200),
            "session": (f"/api/chat/sessions/{session.id}/", tokens[0], 200),
        }
        cpu: dict[tuple[str, str], list[float]] = {}
        ratios: dict[str, list[float]] = {}
        print(f"{args.requests} requests of each kind per server, {args.rounds} rounds, each on a new connection")
        for round_index in range(args.rounds):
            order = list(servers) if round_index % 2 == 0 else list(reversed(servers))
            for kind, (path, token, expected) in kinds.items():
                per_request: dict[str, float] = {}
                for name in order:
                    server = servers[name]
                    for _ in range(20):  # warm: the pool's connections, the imports of a first request
                        request(server.port, path, token)
                    before = tree_cpu_seconds(server.process.pid)
                    for _ in range(args.requests):
                        status, _length = request(server.port, path, token)
                        if status != expected:
                            raise RuntimeError(f"{kind} on {name}: {status}, expected {expected}")
                    per_request[name] = (tree_cpu_seconds(server.process.pid) - before) / args.requests
                    cpu.setdefault((kind, name), []).append(per_request[name])
                ratios.setdefault(kind, []).append(per_request["stream"] / per_request["web"])
        print(f"\n{'request':<8} {'stream ms CPU':>22} {'web ms CPU':>22} {'stream / web':>20}")
        for kind in kinds:
            cells = []
            for name in servers:
                ms = [1000 * value for value in cpu[(kind, name)]]
                cells.append(f"{statistics.median(ms):6.2f} ({min(ms):.2f}-{max(ms):.2f})")
            r = ratios[kind]
            print(f"{kind:<8} {cells[0]:>22} {cells[1]:>22} {statistics.median(r):8.2f} ({min(r):.2f}-{max(r):.2f})")
        return 0
    finally:
        stack.close()
        model.stop()


if __name__ == "__main__":
    sys.exit(main())
