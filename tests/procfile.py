"""The `Procfile`'s processes for end-to-end tests and benchmarks: each line parsed, `$PORT` substituted.

`ProcfileProcess("web", env, log)` runs the `web:` line as a deploy would,
through the shell (`sh -c 'exec <line>'`, with `PORT` set and the
virtualenv's `bin` first on `PATH`), in its own process group, with its
output in a file; `kill()` is SIGKILL, `terminate()` SIGTERM. Brokers:
`rabbitmq_env()` gives a run its own RabbitMQ queue (deleted by
`delete_queue`); `embedded_env(folder)` the embedded broker in a folder.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RABBITMQ_URL = os.environ.get("SILVIA_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")


def procfile_lines(path: Path = ROOT / "Procfile") -> dict[str, str]:
    """`{process type: command}` of a Procfile (`name: command` lines; `#` comments and blanks skipped)."""
    lines: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.strip() and not raw.lstrip().startswith("#"):
            name, command = raw.split(":", 1)
            lines[name.strip()] = command.strip()
    return lines


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ProcfileProcess:
    """One process of the Procfile, running until `stop()`, `terminate()` or `kill()`."""

    def __init__(self, name: str, env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        # The tests' servers listen on loopback only, whatever the Procfile says.
        command = procfile_lines()[name].replace("0.0.0.0", "127.0.0.1")
        bin_dir = str(Path(sys.executable).parent)
        full_env = {
            **os.environ,
            "DJANGO_DEBUG": "false",
            # Node names are unique per broker (RabbitMQ is shared with other runs).
            "CELERY_WORKER_NAME": f"test-{uuid.uuid4().hex[:12]}",
            **env,
            "PORT": str(self.port),
        }
        full_env["PATH"] = bin_dir + os.pathsep + full_env.get("PATH", "")
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                ["/bin/sh", "-c", f"exec {command}"],
                cwd=ROOT,
                env=full_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_until(self, ready: str, timeout: float = 60.0) -> ProcfileProcess:
        """Wait until the output holds `ready` (a worker's "ready."), or a web process accepts connections."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.output()}")
            if ready == "port":
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    return self
                except OSError:
                    pass
            elif ready in self.output():
                return self
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start in {timeout} s:\n{self.output()}")

    def kill(self) -> None:
        """SIGKILL, as an OOM killer or a lost machine would."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def terminate(self) -> None:
        """SIGTERM, as a deploy does; does not wait."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)

    def stop(self) -> None:
        self.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.kill()


def start_web(env: dict[str, str], log_path: Path) -> ProcfileProcess:
    """The `web:` line: gunicorn, the API, pages and admin."""
    return ProcfileProcess("web", env, log_path).wait_until("port")


def start_stream(env: dict[str, str], log_path: Path) -> ProcfileProcess:
    """The `stream:` line: uvicorn, the live turns' streams (it serves every other route too)."""
    return ProcfileProcess("stream", env, log_path).wait_until("port")


def start_worker(env: dict[str, str], log_path: Path) -> ProcfileProcess:
    return ProcfileProcess("worker", env, log_path).wait_until(" ready.")


def rabbitmq_available() -> bool:
    from kombu import Connection

    try:
        with Connection(RABBITMQ_URL, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1)
        return True
    except Exception:
        return False


def rabbitmq_env() -> dict[str, str]:
    """A RabbitMQ broker with a queue of this run's own (RabbitMQ is shared with other runs)."""
    return {"CELERY_BROKER_URL": RABBITMQ_URL, "CELERY_TASK_DEFAULT_QUEUE": f"silvia-test-{uuid.uuid4().hex[:12]}"}


def embedded_env(folder: Path) -> dict[str, str]:
    """The embedded broker (kombu's SQLAlchemy transport on a SQLite file) in `folder`."""
    return {"CELERY_BROKER_URL": "", "CELERY_BROKER_DIR": str(folder)}


def delete_queue(env: dict[str, str]) -> None:
    """Delete the run's RabbitMQ queue and its exchange (Celery names both after the queue), if it used one."""
    if not env.get("CELERY_BROKER_URL", "").startswith("amqp://"):
        return
    from kombu import Connection

    with Connection(env["CELERY_BROKER_URL"], connect_timeout=5) as conn:
        channel = conn.default_channel
        channel.queue_delete(env["CELERY_TASK_DEFAULT_QUEUE"])
        channel.exchange_delete(env["CELERY_TASK_DEFAULT_QUEUE"])


class Stack:
    """Web and worker processes of one test on one broker; `close()` stops them all and deletes the queue."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env, self.folder = env, folder
        self.processes: list[ProcfileProcess] = []

    def web(self, **extra: str) -> ProcfileProcess:
        return self._started(start_web, extra)

    def stream(self, **extra: str) -> ProcfileProcess:
        return self._started(start_stream, extra)

    def worker(self, **extra: str) -> ProcfileProcess:
        return self._started(start_worker, extra)

    def _started(self, start, extra: dict[str, str]) -> ProcfileProcess:
        index = len(self.processes)
        process = start({**self.env, **extra}, self.folder / f"process-{index}.log")
        self.processes.append(process)
        return process

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} {p.process.pid}\n{p.output()}" for p in self.processes)

    def close(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
        delete_queue(self.env)
