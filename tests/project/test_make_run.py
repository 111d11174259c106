"""`make run` and `make run-recorded` stop at once, saying why, when an address they serve on is taken
(issue 21, item 4).

Real make, real sockets: a listening socket holds the port; make must exit
before migrating or starting anything. Should the check ever fail, make would
go on to serve: the process group is killed at the timeout, on a throwaway
SQLite database.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def _taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _make_run_recorded(tmp_path: Path, recorded_port: int, host: str) -> subprocess.CompletedProcess[str]:
    return _make(tmp_path, "run-recorded", f"RECORDED_PORT={recorded_port}", f"HOST={host}")


def _make(tmp_path: Path, target: str, *assignments: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    command = ["make", "--no-print-directory", target, *assignments]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"make {target} went on serving with its port taken")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def test_run_recorded_stops_when_the_recorded_models_port_is_taken(tmp_path):
    with _taken_port() as port:
        result = _make_run_recorded(tmp_path, port, f"127.0.0.1:{_free_port()}")
    assert result.returncode != 0
    assert (
        f"make run-recorded: 127.0.0.1:{port} (the recorded model) is taken by another process; "
        "stop it, or pick another address: make run-recorded RECORDED_PORT=..."
    ) in result.stderr
    assert "migrate" not in result.stdout + result.stderr  # stopped before doing anything
    assert not (tmp_path / "db.sqlite3").exists()


def test_run_recorded_stops_when_the_demo_servers_address_is_taken(tmp_path):
    with _taken_port() as port:
        result = _make_run_recorded(tmp_path, _free_port(), f"127.0.0.1:{port}")
    assert result.returncode != 0
    assert f"make run-recorded: 127.0.0.1:{port} (the demo server) is taken by another process" in result.stderr
    assert "HOST=..." in result.stderr
    assert "serve_recorded_model" not in result.stdout + result.stderr


def test_run_stops_when_its_address_is_taken(tmp_path):
    # Started anyway, uvicorn failed after migrate and the demo's setup, logging only
    # `builtins.OSError (message withheld)`: the log filter keeps an exception's text out.
    with _taken_port() as port:
        result = _make(tmp_path, "run", f"HOST=127.0.0.1:{port}")
    assert result.returncode != 0
    assert (
        f"make run: 127.0.0.1:{port} (the demo server) is taken by another process; "
        "stop it, or pick another address: make run HOST=..."
    ) in result.stderr
    assert "migrate" not in result.stdout + result.stderr  # stopped before doing anything
    assert not (tmp_path / "db.sqlite3").exists()


MESSAGE = "make run: another make run is serving from this folder (it holds {lock}); two would share one embedded"


def test_a_second_run_on_the_same_folder_stops_before_touching_it(tmp_path):
    # The first `make run` holds the lock for as long as its server runs (below); here the test holds it.
    import fcntl

    lock = tmp_path / "make-run.lock"
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    (metrics / "counter_1.db").write_bytes(b"the first run's figures")
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = _make(
            tmp_path, "run", f"HOST=127.0.0.1:{_free_port()}", f"RUN_LOCK={lock}", f"PROMETHEUS_MULTIPROC_DIR={metrics}"
        )
    assert result.returncode != 0
    assert MESSAGE.format(lock=lock) in result.stderr
    assert "migrate" not in result.stdout + result.stderr
    assert (metrics / "counter_1.db").read_bytes() == b"the first run's figures"  # not emptied
    assert not (tmp_path / "db.sqlite3").exists()


def test_the_lock_lasts_as_long_as_the_command_it_became(tmp_path):
    lock = str(tmp_path / "make-run.lock")
    helper = [sys.executable, "devtools/run_lock.py", lock, "held"]
    started = tmp_path / "started"
    # The command runs only once the lock is taken; it says so in a file. (Probing with a second helper while the
    # first starts would race it for the lock.)
    server = subprocess.Popen([*helper, "/bin/sh", "-c", f"touch '{started}'; exec /bin/sleep 30"], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60  # a wait for its start, not a timing: CI machines are loaded
        while not started.exists():
            assert server.poll() is None, "the command did not take the lock"
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        second = subprocess.run(helper, cwd=ROOT, capture_output=True, text=True)
        assert (second.returncode, second.stderr) == (1, "held\n")
    finally:
        server.kill()
        server.wait()
    assert subprocess.run(helper, cwd=ROOT).returncode == 0  # the command is gone, and the lock with it
