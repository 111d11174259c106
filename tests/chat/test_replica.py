"""Reads on a real PostgreSQL streaming replica (chat.replica, docs/deploying.md#a-read-replica).

A throwaway primary and its replica (`pg_basebackup -R`, tests/pg_replica.py), migrated, and the
Procfile's processes on them, every one given `DATABASE_REPLICA_URL`: web (gunicorn), stream (uvicorn)
and a worker on the embedded broker, live turns answered by the recorded model. The replica's lag is made
real by pausing its replay (`pg_wal_replay_pause()`):

- a read that may go to the replica goes there: a session written on the primary behind the service's back
  (no write count) is counted (the count is read on the primary) but not in its owner's page of the list
  until the replica replays it;
- read-your-writes: after each turn's `done` (written by the worker), its user's GET of the session, of the
  list and of the turn's article (the page's fetch after `done`) hold the turn, with the replica paused and
  then replaying: 0 stale reads;
- every write and LISTEN/NOTIFY on the primary: the turns run and stream at all while the replica is
  read-only and paused.

Fails under CI when it cannot make its replica (PostgreSQL's binaries are needed).
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.live_support import SSEClient, script, step, text
from tests.pg_replica import ReplicaPair, postgres_bin
from tests.procfile import ROOT, Stack, embedded_env

ROUNDS = 6
ANSWER = "Your checking account holds $5,000."

USERS = """
import json
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.hashers import make_password
from django.contrib.sessions.backends.db import SessionStore
from rest_framework.authtoken.models import Token
users = {}
for name in ("maya", "sam"):
    user = get_user_model().objects.create(username=name, password=make_password(None))
    signed_in = SessionStore()
    signed_in.update({SESSION_KEY: str(user.pk), HASH_SESSION_KEY: user.get_session_auth_hash(),
                      BACKEND_SESSION_KEY: "django.contrib.auth.backends.ModelBackend"})
    signed_in.create()
    users[name] = [Token.objects.create(user=user).key, user.pk, signed_in.session_key]
print(json.dumps(users))
"""


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def get(base_url: str, path: str, token: str = "", session: str = "") -> tuple[int, bytes]:
    """A GET with an API token, or as a signed-in browser (its session cookie)."""
    host, port = base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Authorization": f"Token {token}"} if token else {"Cookie": f"sessionid={session}"}
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.fixture
def pair():
    binaries = postgres_bin()
    if binaries is None:
        missing = "PostgreSQL's binaries (/usr/lib/postgresql/*/bin) are needed to make a replica"
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    replicas = ReplicaPair(binaries).start()
    try:
        yield replicas
    finally:
        replicas.stop()


def test_reads_go_to_the_replica_and_each_user_reads_their_own_writes(pair, recorded_model_server, tmp_path: Path):
    pair.execute("primary", "CREATE DATABASE silvia")
    env = {"DATABASE_URL": pair.url("primary", "silvia"), "DATABASE_REPLICA_URL": pair.url("replica", "silvia")}
    manage(env, "migrate", "--no-input", "-v", "0")
    tokens = json.loads(manage(env, "shell", "-v", "0", "-c", USERS).strip().splitlines()[-1])
    (maya, maya_id, maya_session), (sam, sam_id, _) = tokens["maya"], tokens["sam"]
    pair.wait_caught_up()
    recorded_model_server.load([script(step(text(ANSWER)))])
    stack = Stack(
        {
            **env,
            **embedded_env(tmp_path / "broker"),
            "ANTHROPIC_BASE_URL": recorded_model_server.base_url,
            "ANTHROPIC_API_KEY": "test-key",
            "LIVE_TURN_POLL_SECONDS": "0.05",
        },
        tmp_path,
    )
    try:
        web, stream = stack.web(), stack.stream()
        stack.worker()
        assert get(web.base_url, "/api/chat/sessions/", sam) == (
            200,
            b'{"count":0,"next":null,"previous":null,"results":[]}',
        )

        # The replica serves reads: a session written on the primary without its write count (not through
        # chat.services) stays out of sam's list while the replica's replay is paused.
        pair.pause_replay()
        pair.execute(
            "primary",
            "INSERT INTO chat_sessions (id, user_id, title, created_at, updated_at) "
            f"VALUES ('{uuid.uuid4()}', {sam_id}, 'behind its back', now(), now())",
            "silvia",
        )
        listed = json.loads(get(web.base_url, "/api/chat/sessions/", sam)[1])
        assert (listed["count"], listed["results"]) == (1, [])  # the count is the primary's, the page the replica's

        stale: list[str] = []

        def turn_then_read(session_id: uuid.UUID) -> None:
            post = SSEClient(stream.base_url, "POST", f"/api/chat/sessions/{session_id}/turns/", maya, {"message": "?"})
            events = post.events()
            post.close()
            assert events[-1][1] == "done", events[-3:]
            log_id = events[-1][2]["log_id"]
            status, body = get(web.base_url, f"/api/chat/sessions/{session_id}/", maya)
            if status != 200 or log_id not in [m["id"] for m in json.loads(body)["messages"]]:
                stale.append(f"detail {status}")
            listed = json.loads(get(web.base_url, "/api/chat/sessions/", maya)[1])["results"]
            if str(session_id) not in [s["id"] for s in listed]:
                stale.append("list")
            status, body = get(web.base_url, f"/chat/{session_id}/turns/{log_id}/", session=maya_session)
            if status != 200 or ANSWER.encode() not in body:
                stale.append(f"page {status}")

        # Read-your-writes with the replica paused (its lag unbounded), in a new session and a growing one.
        ongoing = uuid.uuid4()
        for round_ in range(ROUNDS):
            turn_then_read(uuid.uuid4() if round_ % 2 else ongoing)
        assert stale == [], f"{len(stale)} stale reads after the user's own writes: {stale}"

        # Replaying again, the replica catches up: sam's list holds the session written behind its back.
        pair.resume_replay()
        pair.wait_caught_up()
        assert [s["title"] for s in json.loads(get(web.base_url, "/api/chat/sessions/", sam)[1])["results"]] == [
            "behind its back"
        ]

        # Read-your-writes with the replica replaying (its lag as small as it is).
        for round_ in range(ROUNDS):
            turn_then_read(uuid.uuid4() if round_ % 2 else ongoing)
        assert stale == [], f"{len(stale)} stale reads after the user's own writes: {stale}"
        marks = pair.execute("primary", f"SELECT seq FROM chat_user_write_marks WHERE user_id = {maya_id}", "silvia")
        assert marks == [(2 * ROUNDS,)]  # one count per turn, in the turn's own transaction
    finally:
        stack.close()
