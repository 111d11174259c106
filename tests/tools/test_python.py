"""`execute_python` in the real bubblewrap sandbox: output shape, limits, environment, folder.

Hostile code (files, network, processes, privileges) is tests/tools/test_sandbox_hostile_*.py."""

from __future__ import annotations

import dataclasses
import json
import textwrap
import time

import pytest
from django.core.exceptions import ImproperlyConfigured

from citations.citable import to_citable_content
from citations.targets import AnalysisTarget, MarketDataTarget
from citations.tools import ToolError, ToolExecutor
from tests.sandbox_support import processes_with, the_sandbox
from tools.egress import EgressAllowlist
from tools.python import ExecutePythonTool, execute_python_tool

MB = 1024 * 1024


@pytest.fixture(scope="module")
def sandbox():
    return the_sandbox()


@pytest.fixture
def tool(sandbox):
    """Small limits so a runaway test ends within about a second of CPU; the wall limit leaves room for a loaded CI."""
    return ExecutePythonTool(
        sandbox=sandbox, timeout_seconds=15.0, cpu_seconds=1, memory_bytes=256 * MB, output_bytes=4096
    )


def _run(tool, code):
    return tool.run({"code": textwrap.dedent(code)}, user=None)


def test_is_a_tool_executor(tool):
    assert isinstance(tool, ToolExecutor)
    definition = tool.definition()
    assert definition["name"] == "execute_python"
    assert definition["input_schema"]["required"] == ["code"]


def test_stdout_and_stderr(tool):
    output = _run(tool, "import sys\nprint('hello')\nprint('warn', file=sys.stderr)")
    assert output == {"stdout": "hello\n", "stderr": "warn\n"}


def test_json_stdout_gives_spec_4_blocks(tool):
    code = """\
        import json  # a finnhub quote, as the Finnhub client returns it
        print(json.dumps({"symbol": "aapl", "c": 189.5}))
        print("Average: 12.5")
    """
    tool_input = {"code": textwrap.dedent(code)}
    output = tool.run(tool_input, user=None)
    assert output["stdout"] == '{"symbol": "aapl", "c": 189.5}\nAverage: 12.5\n'
    blocks = to_citable_content("execute_python", tool_input, output)
    assert [(b.source, b.title, b.texts, b.target) for b in blocks] == [
        (
            "silvia://market-data/finnhub/AAPL",
            "AAPL market data",
            ['{"symbol": "aapl", "c": 189.5}'],
            MarketDataTarget("AAPL"),
        ),
        ("silvia://market-data/finnhub", "Live data", ["Average: 12.5"], AnalysisTarget()),
    ]


def test_plain_output_is_analysis(tool):
    tool_input = {"code": "print(sum(range(10)))"}
    blocks = to_citable_content("execute_python", tool_input, tool.run(tool_input, user=None))
    assert [(b.source, b.title, b.texts, b.target) for b in blocks] == [
        ("silvia://analysis", "Analysis", ["45"], AnalysisTarget())
    ]


ENVIRON = "import json, os; print(json.dumps(dict(os.environ)))"


def test_environment_holds_only_what_the_tool_passes(tool, monkeypatch):
    monkeypatch.setenv("EXA_API_KEY", "exa-secret")
    monkeypatch.setenv("PYTHONPATH", "/nowhere")
    # bwrap sets PWD; Python adds LC_CTYPE itself when the locale is C (PEP 538); nothing of ours.
    assert json.loads(_run(tool, ENVIRON)["stdout"]) == {"PWD": "/tmp", "LC_CTYPE": "C.UTF-8"}


def test_finnhub_key_and_the_proxy_are_the_variables_passed(sandbox):
    allowlist = EgressAllowlist(hosts=frozenset({("finnhub.io", 443)}))
    tool = ExecutePythonTool(sandbox=sandbox, allowlist=allowlist, timeout_seconds=3.0, finnhub_api_key="fh-key")
    environ = json.loads(tool.run({"code": ENVIRON}, user=None)["stdout"])
    proxy = environ.get("https_proxy", "")
    assert proxy.startswith("http://127.0.0.1:")  # the relay to the egress proxy, inside the sandbox
    expected = {"PWD": "/tmp", "LC_CTYPE": "C.UTF-8", "FINNHUB_API_KEY": "fh-key"}
    assert environ == {**expected, "https_proxy": proxy, "HTTPS_PROXY": proxy}
    assert "fh-key" not in repr(tool)


def test_working_folder_is_an_empty_tmpfs_each_call(tool):
    code = """\
        import os
        os.makedirs("sub/locked")
        open("sub/locked/data.txt", "w").write("x")
        os.chmod("sub/locked", 0o500)
        print(os.getcwd())
        print(sorted(os.listdir(".")))
    """
    assert _run(tool, code)["stdout"] == "/tmp\n['main.py', 'sub']\n"
    # Nothing of the last call is left: each call mounts a new tmpfs.
    assert _run(tool, "import os; print(sorted(os.listdir('.')))")["stdout"] == "['main.py']\n"


def test_infinite_loop_hits_the_cpu_limit(sandbox):
    # A wall limit far above the CPU one: on a loaded machine 1 s of CPU can take several seconds of wall time.
    tool = ExecutePythonTool(sandbox=sandbox, timeout_seconds=60.0, cpu_seconds=1, memory_bytes=256 * MB)
    with pytest.raises(ToolError) as info:
        _run(tool, "while True:\n    pass")
    assert info.value.reason == "execute_python stopped: CPU time limit of 1 s"


def test_sleep_hits_the_wall_time_limit(sandbox):
    tool = ExecutePythonTool(sandbox=sandbox, timeout_seconds=0.5)
    started = time.monotonic()
    with pytest.raises(ToolError) as info:
        tool.run({"code": "import time\ntime.sleep(30)"}, user=None)
    assert info.value.reason == "execute_python timed out after 0.5 s (wall time)"
    assert time.monotonic() - started < 10  # not the 30 s the code asked for


def test_timeout_kills_the_children_too(sandbox):
    marker = f"silvia-test-child-{time.monotonic_ns()}"
    code = f"""\
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", {marker!r}])
        time.sleep(60)
    """
    tool = ExecutePythonTool(sandbox=sandbox, timeout_seconds=1.0)
    with pytest.raises(ToolError, match="timed out"):
        _run(tool, code)
    deadline = time.monotonic() + 2
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker) == []


def test_memory_bomb(tool):
    with pytest.raises(ToolError) as info:
        _run(tool, "blob = bytearray(2 * 1024 ** 3)")
    assert info.value.reason == "execute_python exited with status 1: MemoryError"


def test_the_reason_is_the_last_error_line_not_a_traceback_cut_off_after_it():
    """A fork bomb's processes print tracebacks at once, and those still printing when the sandbox ends leave
    a header or a frame last: the reason is the last exception line before them."""
    from tools.python import _last_line

    interleaved = (
        "Traceback (most recent call last):\n"
        '  File "<string>", line 3, in <module>\n'
        "BlockingIOError: [Errno 11] Resource temporarily unavailable\n"
        "Traceback (most recent call last):\n"
        '  File "<string>", line 3, in <module>\n'
    )
    assert _last_line(interleaved) == "BlockingIOError: [Errno 11] Resource temporarily unavailable"
    assert _last_line("Traceback (most recent call last):\n") == "Traceback (most recent call last):"
    assert _last_line("   only indented\n") == "only indented"
    assert _last_line("\n \n") == "no error message"
    assert _last_line("E" * 400) == "E" * 300


def test_exception_gives_its_last_line(tool):
    with pytest.raises(ToolError) as info:
        _run(tool, "print('partial')\nraise ValueError('bad ticker')")
    assert info.value.reason == "execute_python exited with status 1: ValueError: bad ticker"


def test_syntax_error(tool):
    with pytest.raises(ToolError) as info:
        _run(tool, "def (")
    assert info.value.reason.startswith("execute_python exited with status 1: SyntaxError")


def test_crash_by_signal(tool):
    with pytest.raises(ToolError) as info:
        _run(tool, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert info.value.reason == "execute_python crashed (SIGSEGV)"


def test_exit_status(tool):
    with pytest.raises(ToolError) as info:
        _run(tool, "import sys\nsys.exit(3)")
    assert info.value.reason == "execute_python exited with status 3: no error message"


def test_big_output_is_capped(tool):
    output = _run(tool, "import sys\nprint('x' * 100_000)\nprint('y' * 10, file=sys.stderr)")
    assert output["stdout"] == "x" * 4096
    assert output["stderr"] == "y" * 10 + "\n[stdout cut at 4096 bytes]\n"


def test_endless_output_ends_at_the_wall_time_with_bounded_memory(sandbox):
    tool = ExecutePythonTool(sandbox=sandbox, timeout_seconds=1.0, output_bytes=1024)
    with pytest.raises(ToolError, match="timed out"):
        tool.run({"code": "while True:\n    print('z' * 1000)"}, user=None)


def test_output_is_text_a_database_can_store(tool):
    code = "import sys\nsys.stdout.buffer.write(b'a\\x00b\\xffc\\n')"
    assert _run(tool, code)["stdout"] == "a\ufffdb\ufffdc\n"


def test_cut_inside_a_utf8_character(tool):
    output = _run(tool, "print('é' * 4000)")  # 8,000 bytes; the cut at 4,096 falls on a boundary
    assert output["stdout"] == "é" * 2048
    output = _run(tool, "print('a' + 'é' * 4000)")  # here it splits one
    assert output["stdout"] == "a" + "é" * 2047 + "\ufffd"


def test_isolated_mode_standard_library_only(tool):
    code = "import sys\nprint(sys.flags.isolated, sys.flags.no_site, '' in sys.path, 'site' in sys.modules)"
    assert _run(tool, code)["stdout"] == "1 1 False False\n"
    with pytest.raises(ToolError) as info:
        _run(tool, "import django")
    assert info.value.reason == "execute_python exited with status 1: ModuleNotFoundError: No module named 'django'"


@pytest.mark.parametrize(
    ("tool_input", "reason"),
    [
        ({}, "input.code must be a non-empty string"),
        ({"code": "  \n"}, "input.code must be a non-empty string"),
        ({"code": ["print(1)"]}, "input.code must be a non-empty string"),
        ({"code": "#" * 100_001}, "input.code is longer than 100000 characters"),
        ({"code": "print(1)\x00"}, "input.code contains a NUL character"),
        ({"code": "print('\ud800')"}, "input.code is not valid Unicode text (a lone surrogate)"),
    ],
)
def test_bad_input(tool, tool_input, reason):
    with pytest.raises(ToolError) as info:
        tool.run(tool_input, user=None)
    assert info.value.reason == reason


def test_factory_reads_settings(settings, sandbox):
    settings.EXECUTE_PYTHON_ENABLED = False
    assert execute_python_tool() is None
    settings.EXECUTE_PYTHON_ENABLED = True
    settings.EXECUTE_PYTHON_TIMEOUT_SECONDS = 7.0
    settings.EXECUTE_PYTHON_CPU_SECONDS = 3
    settings.EXECUTE_PYTHON_MEMORY_MB = 300
    settings.EXECUTE_PYTHON_MAX_PROCESSES = 12
    settings.EXECUTE_PYTHON_DISK_MB = 32
    settings.EXECUTE_PYTHON_OUTPUT_BYTES = 2048
    settings.FINNHUB_API_KEY = " fh "
    settings.EXA_API_KEY = ""
    tool = execute_python_tool()
    assert tool == ExecutePythonTool(
        sandbox=sandbox,
        allowlist=EgressAllowlist(hosts=frozenset({("finnhub.io", 443)})),
        timeout_seconds=7.0,
        cpu_seconds=3,
        memory_bytes=300 * MB,
        max_processes=12,
        disk_bytes=32 * MB,
        output_bytes=2048,
        finnhub_api_key="fh",
    )
    for name, value, message in [
        ("EXECUTE_PYTHON_MEMORY_MB", 10, "EXECUTE_PYTHON_MEMORY_MB must be 64 to 65536"),
        ("EXECUTE_PYTHON_MAX_PROCESSES", 1, "EXECUTE_PYTHON_MAX_PROCESSES must be 2 to 1024"),
        ("EXECUTE_PYTHON_DISK_MB", 0, "EXECUTE_PYTHON_DISK_MB must be 1 to 65536"),
    ]:
        old = getattr(settings, name)
        setattr(settings, name, value)
        with pytest.raises(ImproperlyConfigured, match=message):
            execute_python_tool()
        setattr(settings, name, old)


@pytest.mark.parametrize("bwrap", ["/nonexistent/bwrap", "/bin/false"], ids=["bwrap gone", "bwrap fails"])
def test_a_sandbox_that_does_not_start_is_a_tool_error_never_an_unconfined_run(sandbox, bwrap):
    # The probe passed, then bwrap went away or stopped working: the call fails, nothing runs outside.
    broken = dataclasses.replace(sandbox, bwrap=bwrap)
    tool = ExecutePythonTool(sandbox=broken, timeout_seconds=3.0)
    with pytest.raises(ToolError) as info:
        tool.run({"code": "print('ran')"}, user=None)
    assert info.value.reason == "execute_python is unavailable: the sandbox did not start"
