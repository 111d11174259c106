"""Hostile code in the `execute_python` sandbox (docs/sandbox.md#how-it-is-tested), one test per attack: its
limits. Fork bombs, a memory bomb, a 10 GB file, many files, writes outside the working folder, setuid and
unshare: each refused with an error the code prints or a `ToolError`; and no tool offered when bubblewrap is
missing or cannot start."""

from __future__ import annotations

import os
import re
import textwrap
import time

import pytest

from citations.tools import ToolError
from tests.sandbox_support import MB, processes_with, run
from tools.python import MAX_FILE_BYTES, ExecutePythonTool, execute_python_tool
from tools.registry import configured_tools
from tools.sandbox import SandboxUnavailable, find_sandbox


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
