"""Hostile code in the `execute_python` sandbox (docs/sandbox.md#how-it-is-tested), one test per attack.

Each attack is refused: the code sees an error it prints (a bounded output)
or the call ends with a `ToolError` (the turn's `is_error` result). The
network tests talk to loopback only; the proxy tests prove that a refused
host is never looked up nor connected to. tests/test_sandbox_live.py runs
hostile code through a live turn.
"""

from __future__ import annotations

import json
import os
import re
import socket
import textwrap
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from citations.citable import to_citable_content
from citations.targets import MarketDataTarget
from citations.tools import ToolError
from tests.sandbox_support import QUOTE, FinnhubStandIn, Trap, make_certificate, processes_with, the_sandbox
from tools.egress import EgressAllowlist
from tools.python import MAX_FILE_BYTES, ExecutePythonTool, execute_python_tool
from tools.registry import configured_tools
from tools.sandbox import SandboxUnavailable, find_sandbox

MB = 1024 * 1024
FINNHUB = ("finnhub.io", 443)


@pytest.fixture(scope="module")
def sandbox():
    return the_sandbox()


@pytest.fixture
def tool(sandbox):
    return ExecutePythonTool(sandbox=sandbox, timeout_seconds=15.0, cpu_seconds=2, memory_bytes=256 * MB)


def run(tool: ExecutePythonTool, code: str) -> dict:
    """Run `code`, which prints one JSON document; that document."""
    output = tool.run({"code": textwrap.dedent(code)}, user=None)
    return json.loads(output["stdout"])


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
    service = Trap()  # stands for the service's own port (tests/test_sandbox_live.py uses a real server)
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
        time.sleep(0.2)
        assert service.accepted == 0
    finally:
        service.stop()
    assert seen == {**{str(p): "ConnectionRefusedError" for p in ports}, "dns": "gaierror"}


# Sends one raw request to the egress proxy through the relay; prints the proxy's status line.
ASK_PROXY = """\
import json, os, socket, urllib.parse
def ask(request):
    proxy = urllib.parse.urlsplit(os.environ["https_proxy"])
    with socket.create_connection((proxy.hostname, proxy.port), timeout=5) as s:
        s.sendall(request.encode())
        return s.recv(200).decode().split("\\r\\n")[0]
"""


@pytest.fixture
def trap():
    listener = Trap()
    yield listener
    listener.stop()


def test_the_proxy_refuses_a_host_not_on_the_allowlist_connecting_nowhere(sandbox, trap, monkeypatch):
    lookups: list[object] = []
    real_getaddrinfo = socket.getaddrinfo

    def recording_getaddrinfo(*args, **kwargs):
        lookups.append(args[0])
        return real_getaddrinfo(*args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", recording_getaddrinfo)
    # finnhub.io is allowed (and sent to the trap, to see any connection at all).
    allowlist = EgressAllowlist(hosts=frozenset({FINNHUB}), overrides={FINNHUB: ("127.0.0.1", trap.port)})
    tool = ExecutePythonTool(sandbox=sandbox, allowlist=allowlist, timeout_seconds=5.0)
    requests = {
        "other host": "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
        "loopback": f"CONNECT 127.0.0.1:{trap.port} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "database": "CONNECT localhost:5432 HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "allowed host, other port": "CONNECT finnhub.io:80 HTTP/1.1\r\nHost: finnhub.io\r\n\r\n",
        "look-alike": "CONNECT finnhub.io.evil.example:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "plain HTTP": "GET http://finnhub.io/api/v1/quote HTTP/1.1\r\nHost: finnhub.io\r\n\r\n",
        "Host header says finnhub": "CONNECT evil.example:443 HTTP/1.1\r\nHost: finnhub.io:443\r\n\r\n",
        "not HTTP": "\x16\x03\x01 hello\r\n\r\n",
    }
    code = ASK_PROXY + f"print(json.dumps({{name: ask(r) for name, r in {requests!r}.items()}}))"
    seen = run(tool, code)
    time.sleep(0.2)
    assert seen == {
        "other host": "HTTP/1.1 403 Forbidden",
        "loopback": "HTTP/1.1 403 Forbidden",
        "database": "HTTP/1.1 403 Forbidden",
        "allowed host, other port": "HTTP/1.1 403 Forbidden",
        "look-alike": "HTTP/1.1 403 Forbidden",
        "plain HTTP": "HTTP/1.1 405 Method Not Allowed",
        "Host header says finnhub": "HTTP/1.1 403 Forbidden",
        "not HTTP": "HTTP/1.1 400 Bad Request",
    }
    assert trap.accepted == 0
    assert lookups == []


@pytest.fixture(scope="module")
def finnhub(tmp_path_factory):
    cert, key = make_certificate(tmp_path_factory.mktemp("finnhub"), "finnhub.io")
    stand_in = FinnhubStandIn(cert, key)
    yield stand_in, cert.read_text()
    stand_in.stop()


FETCH_QUOTE = """\
import json, os, ssl, urllib.request
context = ssl.create_default_context(cadata=CA)  # the stand-in's certificate, for the test only
url = "https://finnhub.io/api/v1/quote?symbol=AAPL&token=" + os.environ["FINNHUB_API_KEY"]
with urllib.request.urlopen(url, context=context, timeout=5) as response:
    print(json.dumps({"symbol": "AAPL", **json.load(response)}))
"""


def test_finnhub_through_the_allowlist_reaches_the_stand_in(sandbox, finnhub):
    stand_in, ca = finnhub
    allowlist = EgressAllowlist(hosts=frozenset({FINNHUB}), overrides={FINNHUB: ("127.0.0.1", stand_in.port)})
    tool = ExecutePythonTool(sandbox=sandbox, allowlist=allowlist, finnhub_api_key="fh-test", timeout_seconds=10)
    tool_input = {"code": f"CA = {ca!r}\n" + FETCH_QUOTE}
    output = tool.run(tool_input, user=None)
    assert json.loads(output["stdout"]) == {"symbol": "AAPL", **QUOTE}
    assert stand_in.requests[-1] == ("/api/v1/quote", "AAPL", "fh-test")
    blocks = to_citable_content("execute_python", tool_input, output)
    assert [(b.source, b.target) for b in blocks] == [("silvia://market-data/finnhub/AAPL", MarketDataTarget("AAPL"))]


def test_without_a_finnhub_key_there_is_no_proxy_and_no_way_out(tool):
    code = """\
        import json, os, urllib.request
        try:
            urllib.request.urlopen("https://finnhub.io/api/v1/quote?symbol=AAPL", timeout=3)
            result = "fetched"
        except Exception as error:
            result = type(error).__name__
        print(json.dumps({"proxy": os.environ.get("https_proxy"), "fetch": result,
                          "socket": os.path.exists("/run/egress.sock")}))
    """
    assert run(tool, code) == {"proxy": None, "fetch": "URLError", "socket": False}


def test_fork_bomb_stops_at_the_process_limit(sandbox):
    tool = ExecutePythonTool(sandbox=sandbox, timeout_seconds=15.0, max_processes=8)
    code = """\
        import json, os, time
        children = 0
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                children += 1
        except OSError as error:
            print(json.dumps({"children": children, "error": type(error).__name__}))
    """
    # 8 tasks of the sandbox's uid: bwrap's init, this process, 6 children.
    assert run(tool, code) == {"children": 6, "error": "BlockingIOError"}


def test_fork_bomb_that_ignores_errors_ends_at_the_wall_time_and_leaves_nothing(sandbox):
    marker = f"silvia-fork-bomb-{time.monotonic_ns()}"
    code = f"""\
        import subprocess, sys
        while True:
            try:
                subprocess.Popen([sys.executable, "-c", "while True: pass", {marker!r}])
            except OSError:
                pass
    """
    tool = ExecutePythonTool(sandbox=sandbox, timeout_seconds=2.0, max_processes=8)
    started = time.monotonic()
    with pytest.raises(ToolError) as info:
        tool.run({"code": textwrap.dedent(code)}, user=None)
    assert info.value.reason == "execute_python timed out after 2 s (wall time)"
    assert time.monotonic() - started < 10
    deadline = time.monotonic() + 2
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker) == []


def test_memory_bomb(tool):
    with pytest.raises(ToolError) as info:
        tool.run({"code": "blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 1024 * 1024))"}, user=None)
    assert info.value.reason == "execute_python exited with status 1: MemoryError"


def test_a_10_gb_file_stops_at_the_file_size_limit(tool):
    code = """\
        import json
        written = 0
        try:
            with open("big", "wb") as f:
                while written < 10 * 1024 ** 3:
                    f.write(b"x" * 1024 * 1024)
                    written += 1024 * 1024
        except OSError as error:
            print(json.dumps({"written": written, "error": str(error)}))
    """
    assert run(tool, code) == {"written": MAX_FILE_BYTES, "error": "[Errno 27] File too large"}


def test_many_files_stop_at_the_working_folders_size(sandbox):
    tool = ExecutePythonTool(sandbox=sandbox, timeout_seconds=15.0, disk_bytes=8 * MB)
    code = """\
        import json
        written = 0
        try:
            for i in range(100):
                with open(f"part{i}", "wb") as f:
                    for _ in range(4):
                        f.write(b"x" * 1024 * 1024)
                        f.flush()
                        written += 1024 * 1024
        except OSError as error:
            print(json.dumps({"written": written, "error": str(error)}))
    """
    seen = run(tool, code)
    assert seen["error"] == "[Errno 28] No space left on device" and seen["written"] <= 8 * MB


def test_writes_outside_the_working_folder_are_refused(tool):
    targets = ["/x", "/usr/lib/x", "/etc/x", "/dev/x", "/proc/x", "/run/x", "/lib/x", "/dev/shm/x"]
    code = f"""\
        import json
        seen = {{}}
        for path in {targets!r}:
            try:
                open(path, "w").write("x")
                seen[path] = "written"
            except OSError as error:
                seen[path] = error.strerror
        print(json.dumps(seen))
    """
    seen = run(tool, code)
    assert "written" not in seen.values(), seen
    assert set(seen.values()) <= {"Read-only file system", "No such file or directory", "Permission denied"}
    assert not os.path.exists("/usr/lib/x") and not os.path.exists("/x")


def test_setuid_and_unshare_are_refused(tool):
    code = """\
        import ctypes, json, os
        libc = ctypes.CDLL(None, use_errno=True)
        seen = {"uid": os.getuid(), "euid": os.geteuid()}
        for name, call in [("setuid(0)", lambda: os.setuid(0)), ("setgid(0)", lambda: os.setgid(0))]:
            try:
                call()
                seen[name] = "done"
            except OSError as error:
                seen[name] = error.strerror
        for name, flag in [("user", 0x10000000), ("net", 0x40000000), ("mount", 0x00020000), ("pid", 0x20000000)]:
            seen["unshare " + name] = os.strerror(ctypes.get_errno()) if libc.unshare(flag) != 0 else "done"
        print(json.dumps(seen))
    """
    assert run(tool, code) == {
        "uid": 65534,
        "euid": 65534,
        "setuid(0)": "Invalid argument",  # uid 0 does not exist in the sandbox's user namespace
        "setgid(0)": "Invalid argument",
        "unshare user": "No space left on device",  # bwrap --disable-userns: no nested user namespace
        "unshare net": "Operation not permitted",
        "unshare mount": "Operation not permitted",
        "unshare pid": "Operation not permitted",
    }


@pytest.mark.django_db
def test_not_offered_when_bubblewrap_is_missing_or_cannot_start(settings, caplog):
    settings.EXECUTE_PYTHON_ENABLED = True
    settings.LIVE_TOOL_FACTORIES = []
    for bwrap, reason in [
        ("/nonexistent/bwrap", "bubblewrap (/nonexistent/bwrap) is not installed"),
        ("/bin/false", "bwrap could not start"),  # installed but fails, like bwrap without user namespaces
    ]:
        settings.EXECUTE_PYTHON_BWRAP = bwrap
        caplog.clear()
        assert execute_python_tool() is None
        assert "execute_python" not in [tool.name for tool in configured_tools()]
        # One warning per probe, not one per turn.
        warnings = [r.getMessage() for r in caplog.records if r.name == "tools.sandbox"]
        assert len(warnings) == 1 and warnings[0].startswith(f"execute_python is not offered: {reason}")
        with pytest.raises(SandboxUnavailable, match=re.escape(reason)):
            find_sandbox(bwrap=bwrap, interpreter="", run_as_uid=settings.EXECUTE_PYTHON_SANDBOX_UID)
    settings.EXECUTE_PYTHON_BWRAP = "bwrap"
    assert "execute_python" in [tool.name for tool in configured_tools()]
