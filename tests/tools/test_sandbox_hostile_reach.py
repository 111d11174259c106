"""Hostile code in the `execute_python` sandbox (docs/sandbox.md#how-it-is-tested), one test per attack: what it
cannot see or reach. The service's environment (of the sandbox's init and parent too), the settings and
database files, loopback services and the service's port, name resolution: each an error the code prints.
tests/live/test_turns_sandbox.py runs hostile code through a live turn."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.db import connection

from tests.sandbox_support import Trap, run

# What a read attempt gives: the error's class, or the bytes it read.
TRY_READ = """\
import json, os
def attempt(path):
    try:
        with open(path, "rb") as f:
            return "read: " + f.read(200).decode("utf-8", "replace")
    except Exception as error:
        return type(error).__name__
"""


def test_proc_environ_of_the_sandbox_init_and_parent_hold_nothing_of_the_service(tool, monkeypatch):
    monkeypatch.setenv("DJANGO_SECRET_KEY", "service-secret-marker")
    code = TRY_READ + (
        "print(json.dumps({'1': attempt('/proc/1/environ'), 'parent': attempt(f'/proc/{os.getppid()}/environ'), "
        f"'the service': attempt('/proc/{os.getpid()}/environ'), "
        "'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit())}))"
    )
    seen = run(tool, code)
    # pid 1 is bubblewrap's init, the code's parent; its environment is the
    # one the tool passed (empty here). The service's own pid does not exist.
    assert seen == {"1": "read: ", "parent": "read: ", "the service": "FileNotFoundError", "pids": [1, 2]}


def test_settings_and_database_files_are_not_there(tool):
    database = connection.settings_dict["NAME"] if connection.vendor == "sqlite" else settings.BASE_DIR / "var"
    paths = [
        str(Path(settings.BASE_DIR) / "silvia" / "settings.py"),
        str(Path(settings.BASE_DIR) / ".env"),
        str(database),
        str(Path(settings.BASE_DIR) / "var" / "db.sqlite3"),
        "/etc/passwd",
        "/etc/shadow",
        "/root/.bash_history",
        "/home",
    ]
    code = TRY_READ + f"print(json.dumps({{p: attempt(p) for p in {paths!r}}}))"
    seen = run(tool, code)
    assert seen == dict.fromkeys(paths, "FileNotFoundError")
    listing = run(tool, "import json, os; print(json.dumps(sorted(os.listdir('/'))))")
    assert listing == ["dev", "etc", "lib", "lib64", "proc", "tmp", "usr"]  # /etc holds the CA bundle only


def test_loopback_services_and_the_services_port_are_unreachable(tool):
    service = Trap()  # stands for the service's own port (tests/live/test_turns_sandbox.py uses a real server)
    try:
        ports = [5432, 6379, service.port]
        code = f"""\
            import json, socket
            seen = {{}}
            for port in {ports!r}:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=2).close()
                    seen[port] = "connected"
                except OSError as error:
                    seen[port] = type(error).__name__
            try:
                socket.getaddrinfo("finnhub.io", 443)
                seen["dns"] = "resolved"
            except OSError as error:
                seen["dns"] = type(error).__name__
            print(json.dumps(seen))
        """
        seen = run(tool, code)
        assert service.accepted_before_now() == 0
    finally:
        service.stop()
    assert seen == {**{str(p): "ConnectionRefusedError" for p in ports}, "dns": "gaierror"}
