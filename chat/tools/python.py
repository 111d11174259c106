"""`execute_python`: run model-written Python in a limited subprocess (docs/citable.md, issue 8 item 4).

Off unless `EXECUTE_PYTHON_ENABLED=true`. Each call runs
`python -I -B -X utf8` (the service's own interpreter, isolated mode: no
`PYTHON*` variables, no user site, no script folder on `sys.path`) with:

- an empty environment (only `FINNHUB_API_KEY`, when it is set; Python itself
  adds `LC_CTYPE=C.UTF-8` on a C locale, PEP 538);
- a new temporary working folder holding the code as `main.py`, removed
  afterwards, and a new process group, killed whole at the end;
- limits set by a bootstrap in the child before the code runs (no
  `preexec_fn`, which is unsafe in a threaded server): CPU seconds, address
  space, size of any file written, no core files;
- a wall-time deadline; stdout and stderr each read up to a byte cap, the
  rest drained and dropped.

It is NOT a security boundary: the code can use the network, read every file
the service's user can read, and write to any folder that user can write to
(docs/tools.md lists what it does not protect against).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from chat.tools.base import ToolError

NAME = "execute_python"
MAX_CODE_CHARS = 100_000
# Files the code writes in its folder; its output is capped separately.
MAX_FILE_BYTES = 16 * 1024 * 1024

# Runs in the child before the code: limits first, then the code as
# `__main__`. The hard limits equal the soft ones so the code cannot raise
# them (unless the service runs as root: see docs/tools.md).
_BOOTSTRAP = """\
import resource, runpy, sys
cpu, memory, fsize = (int(a) for a in sys.argv[1:4])
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
sys.argv = ["main.py"]
del cpu, memory, fsize, resource
runpy.run_path("main.py", run_name="__main__")
"""


@dataclass(frozen=True)
class ExecutePythonTool:
    """The `execute_python` executor (`chat.tools.base.ToolExecutor`).

    `timeout_seconds`: wall time of one call. `cpu_seconds`: CPU time
    (RLIMIT_CPU). `memory_bytes`: address space (RLIMIT_AS).
    `output_bytes`: the most kept of stdout and of stderr, each (UTF-8
    bytes). `finnhub_api_key`: passed in as `FINNHUB_API_KEY` when not
    empty. Raises `ValueError` (naming the variable) for a value out of range.
    """

    timeout_seconds: float = 10.0
    cpu_seconds: int = 5
    memory_bytes: int = 512 * 1024 * 1024
    output_bytes: int = 65_536
    finnhub_api_key: str = ""
    name: str = NAME

    def __post_init__(self) -> None:
        if not 0 < self.timeout_seconds <= 600:
            raise ValueError("EXECUTE_PYTHON_TIMEOUT_SECONDS must be more than 0 and at most 600")
        if not 1 <= self.cpu_seconds <= 600:
            raise ValueError("EXECUTE_PYTHON_CPU_SECONDS must be 1 to 600")
        if not 64 * 1024 * 1024 <= self.memory_bytes <= 64 * 1024**3:
            raise ValueError("EXECUTE_PYTHON_MEMORY_MB must be 64 to 65536")
        if not 1_024 <= self.output_bytes <= 16 * 1024 * 1024:
            raise ValueError("EXECUTE_PYTHON_OUTPUT_BYTES must be 1024 to 16777216")

    def __repr__(self) -> str:
        # The dataclass repr would print the Finnhub key.
        return f"ExecutePythonTool(timeout_seconds={self.timeout_seconds}, cpu_seconds={self.cpu_seconds})"

    def definition(self) -> dict[str, Any]:
        """The Messages API tool definition (`name`, `description`, `input_schema`)."""
        return {
            "name": NAME,
            "description": (
                "Run a short Python 3 program and get its stdout and stderr. Print results to stdout; "
                "print JSON (an object or a list, on one line or as the whole output) for data you will cite. "
                f"Limits: {self.timeout_seconds:g} s wall time, {self.cpu_seconds} s CPU, "
                f"{self.memory_bytes // (1024 * 1024)} MB memory, {self.output_bytes} bytes of output. "
                "Only the standard library and the service's installed packages are available; "
                "files written do not outlive the call."
            ),
            "input_schema": {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "The whole program."}},
                "required": ["code"],
            },
        }

    def run(self, tool_input: dict[str, Any], *, user: Any) -> dict[str, Any]:
        """Run `tool_input["code"]`; `{"stdout": str, "stderr": str}` when it exits with status 0.

        Output is decoded as UTF-8 (bad bytes and NUL become U+FFFD), each
        stream cut at `output_bytes`; a cut is noted at the end of `stderr`
        (never cited), so `stdout` stays as printed. Raises `ToolError` for
        a bad input, a timeout, a limit hit, a non-zero exit (with the last
        line of stderr, e.g. `ZeroDivisionError: division by zero`) or a
        signal.
        """
        code = tool_input.get("code") if isinstance(tool_input, dict) else None
        if not isinstance(code, str) or not code.strip():
            raise ToolError("input.code must be a non-empty string")
        if len(code) > MAX_CODE_CHARS:
            raise ToolError(f"input.code is longer than {MAX_CODE_CHARS} characters")
        if "\x00" in code:
            raise ToolError("input.code contains a NUL character")
        folder = tempfile.mkdtemp(prefix="silvia-python-")
        try:
            with open(os.path.join(folder, "main.py"), "wb") as f:
                f.write(code.encode("utf-8"))
            return self._run_in(folder)
        except UnicodeEncodeError:
            raise ToolError("input.code is not valid Unicode text (a lone surrogate)") from None
        finally:
            _remove_folder(folder)

    def _run_in(self, folder: str) -> dict[str, Any]:
        env = {"FINNHUB_API_KEY": self.finnhub_api_key} if self.finnhub_api_key else {}
        argv = [sys.executable, "-I", "-B", "-X", "utf8", "-c", _BOOTSTRAP]
        argv += [str(self.cpu_seconds), str(self.memory_bytes), str(MAX_FILE_BYTES)]
        process = subprocess.Popen(  # noqa: S603 (fixed argv; the code is a file, not a shell string)
            argv,
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert process.stdout is not None and process.stderr is not None
        out, err = _CappedReader(process.stdout, self.output_bytes), _CappedReader(process.stderr, self.output_bytes)
        try:
            status = process.wait(timeout=self.timeout_seconds)
        except subprocess.TimeoutExpired:
            status = None
        finally:
            _kill_group(process.pid)
            process.wait()
        # The pipes close once the group is dead (a grandchild that left the
        # group may hold them open: stop reading after a short grace).
        out.join(1.0)
        err.join(1.0)
        if status is None:
            raise ToolError(f"execute_python timed out after {self.timeout_seconds:g} s (wall time)")
        stdout, stderr = out.text(), err.text()
        if status < 0:
            raise ToolError(_signal_reason(-status, self))
        if status != 0:
            raise ToolError(f"execute_python exited with status {status}: {_last_line(stderr)}")
        notes = [
            f"[{name} cut at {self.output_bytes} bytes]" for name, r in (("stdout", out), ("stderr", err)) if r.cut
        ]
        if notes:
            stderr = (stderr + "\n" if stderr and not stderr.endswith("\n") else stderr) + "\n".join(notes) + "\n"
        return {"stdout": stdout, "stderr": stderr}


class _CappedReader:
    """Reads a pipe in a thread, keeping the first `cap` bytes and dropping the rest."""

    def __init__(self, pipe: IO[bytes], cap: int) -> None:
        self._pipe, self._cap = pipe, cap
        self._data = bytearray()
        self.cut = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with self._pipe:
            while chunk := os.read(self._pipe.fileno(), 65_536):
                room = self._cap - len(self._data)
                if len(chunk) > room:
                    self.cut = True
                self._data += chunk[: max(room, 0)]

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def text(self) -> str:
        return bytes(self._data).decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pid, signal.SIGKILL)


def _signal_reason(signum: int, tool: ExecutePythonTool) -> str:
    if signum == signal.SIGXCPU:
        return f"execute_python stopped: CPU time limit of {tool.cpu_seconds} s"
    if signum == signal.SIGXFSZ:
        return f"execute_python stopped: a file grew past {MAX_FILE_BYTES} bytes"
    if signum == signal.SIGKILL:
        return "execute_python was killed (SIGKILL: CPU or memory limit)"
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return f"execute_python crashed ({name})"


def _last_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no error message"


def _remove_folder(folder: str) -> None:
    # The code may have removed its own write permission on what it made.
    for root, dirs, _files in os.walk(folder):
        for d in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, d), 0o700)
    shutil.rmtree(folder, ignore_errors=True)


def execute_python_tool() -> ExecutePythonTool | None:
    """The tool from settings (`EXECUTE_PYTHON_*`, `FINNHUB_API_KEY`); `None` unless
    `EXECUTE_PYTHON_ENABLED` is true (the tool is then not offered).

    Raises `ImproperlyConfigured` naming the variable when a value is out of range.
    """
    if not getattr(settings, "EXECUTE_PYTHON_ENABLED", False):
        return None
    try:
        return ExecutePythonTool(
            timeout_seconds=settings.EXECUTE_PYTHON_TIMEOUT_SECONDS,
            cpu_seconds=settings.EXECUTE_PYTHON_CPU_SECONDS,
            memory_bytes=settings.EXECUTE_PYTHON_MEMORY_MB * 1024 * 1024,
            output_bytes=settings.EXECUTE_PYTHON_OUTPUT_BYTES,
            finnhub_api_key=(getattr(settings, "FINNHUB_API_KEY", "") or "").strip(),
        )
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None
