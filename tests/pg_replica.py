"""A throwaway PostgreSQL primary and its streaming replica, for the read replica's tests and benchmark.

`ReplicaPair.start()` runs `initdb` for a primary (trust auth, loopback only, `wal_level=replica` as
PostgreSQL sets it), `pg_basebackup -R` of it for a replica (hot standby), each in a folder of its own
under /tmp, with the binaries of /usr/lib/postgresql/*/bin; as `nobody` when run as root (PostgreSQL
refuses root), as .ci/run starts its throwaway cluster. `stop()` stops both and removes the folders.
Replay on the replica can be paused and resumed (`pg_wal_replay_pause()`), which makes its lag real.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg


def postgres_bin() -> Path | None:
    """The newest /usr/lib/postgresql/*/bin holding initdb, pg_ctl and pg_basebackup, if any."""
    found = [Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin") if Path(p, "pg_basebackup").exists()]
    return max(found, key=lambda p: float(p.parent.name), default=None)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ReplicaPair:
    """A primary and its replica on loopback; `url(which, database)` a libpq URL of either."""

    bin: Path
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="silvia-replica-")))
    primary_port: int = 0  # chosen when each server starts (`_start`)
    replica_port: int = 0

    def _run(self, *command: str) -> None:
        as_user = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
        done = subprocess.run([*as_user, *command], capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stdout}{done.stderr}")

    def _start(self, data: Path) -> int:
        """Start the server of `data` on a free loopback port, its port returned. A port found free can be
        taken before the server binds it (another test's outgoing connection takes ports from the same
        ephemeral range: seen in CI with the suites side by side), so a start refused for it tries another."""
        for attempt in range(5):
            port = _free_port()
            options = f"-p {port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
            try:
                self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-l", f"{data}.log", "-w", "-o", options, "start")
                return port
            except RuntimeError:
                log = Path(f"{data}.log").read_text(errors="replace") if Path(f"{data}.log").exists() else ""
                if "Address already in use" not in log or attempt == 4:
                    raise
                Path(f"{data}.log").unlink()
        raise AssertionError("unreachable")

    def start(self) -> ReplicaPair:
        if os.geteuid() == 0:
            shutil.chown(self.folder, "nobody")
        primary, replica = self.folder / "primary", self.folder / "replica"
        self._run(str(self.bin / "initdb"), "-D", str(primary), "-U", "postgres", "--auth=trust", "--encoding=UTF8")
        self.primary_port = self._start(primary)
        self._run(
            str(self.bin / "pg_basebackup"),
            *("-h", "127.0.0.1", "-p", str(self.primary_port), "-U", "postgres"),
            *("-D", str(replica), "-R", "-X", "stream"),
        )
        self.replica_port = self._start(replica)
        return self

    def stop(self) -> None:
        for data in (self.folder / "replica", self.folder / "primary"):
            if (data / "postmaster.pid").exists():
                with contextlib.suppress(RuntimeError):  # stopped already
                    self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, which: str, database: str = "postgres") -> str:
        port = self.primary_port if which == "primary" else self.replica_port
        return f"postgres://postgres@127.0.0.1:{port}/{database}"

    def execute(self, which: str, sql: str, database: str = "postgres") -> list[tuple[object, ...]]:
        with psycopg.connect(self.url(which, database), autocommit=True) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def pause_replay(self) -> None:
        self.execute("replica", "SELECT pg_wal_replay_pause()")
        deadline = time.monotonic() + 30
        while self.execute("replica", "SELECT pg_get_wal_replay_pause_state()")[0][0] != "paused":
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not pause its replay")
            time.sleep(0.05)

    def resume_replay(self) -> None:
        self.execute("replica", "SELECT pg_wal_replay_resume()")

    def wait_caught_up(self, timeout: float = 60) -> None:
        """Until the replica has replayed everything the primary had written when this was called."""
        target = self.execute("primary", "SELECT pg_current_wal_lsn()::text")[0][0]
        deadline = time.monotonic() + timeout
        while not self.execute("replica", f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn")[0][0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the replica did not replay up to {target} in {timeout} s")
            time.sleep(0.05)
