"""`execute_python`: run model-written Python in a bubblewrap sandbox (docs/tools.md, docs/sandbox.md).

Off unless `EXECUTE_PYTHON_ENABLED=true`, and never offered when the sandbox
cannot start (`tools.sandbox.find_sandbox`): there is no unconfined
fallback. Each call runs `python -I -S -B -X utf8` (standard library only)
inside a new sandbox (`tools.sandbox.Sandbox.command`): its own uid,
pid, network, mount, IPC and UTS namespaces, a read-only minimal root, a
fresh size-capped tmpfs at `/tmp` as the working folder, and an environment
holding only what this module passes. A bootstrap in the sandbox sets CPU,
address-space, file-size, process-count and open-file limits before the
code runs; the code arrives on stdin, so nothing of it touches the host's
disk.

The network is the sandbox's own loopback only. When the egress allowlist
(`tools.egress`) is not empty, a CONNECT-only proxy
(`tools.egress_proxy.EgressProxy`) serves it on a Unix socket bound into
the sandbox for this call, and the bootstrap relays `127.0.0.1:<port>` inside
to that socket and sets `https_proxy`: `urllib.request` reaches
`https://finnhub.io/...` through it, and nothing else.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from citations.citable import EXECUTE_PYTHON
from citations.tools import ToolError
from tools.egress import EgressAllowlist, egress_allowlist
from tools.egress_proxy import EgressProxy
from tools.sandbox import EGRESS_SOCKET, Sandbox, SandboxUnavailable, find_sandbox

logger = logging.getLogger(__name__)

NAME = EXECUTE_PYTHON.name
MAX_CODE_CHARS = 100_000
#: The largest file the code may write (RLIMIT_FSIZE); its output is capped separately.
MAX_FILE_BYTES = 16 * 1024 * 1024
#: Open files per process (RLIMIT_NOFILE).
MAX_OPEN_FILES = 256

# Runs in the sandbox before the code (tools/sandbox_bootstrap.py, passed as `-c`): it reads the code,
# starts the egress relay and sets the limits (see that file).
_BOOTSTRAP = (Path(__file__).parent / "sandbox_bootstrap.py").read_text(encoding="utf-8")


@dataclass(frozen=True, kw_only=True)
class ExecutePythonTool:
    """The `execute_python` executor (`citations.tools.ToolExecutor`).

    `sandbox`: the checked bubblewrap setup (`find_sandbox`). `allowlist`:
    where the code may connect (empty: nowhere). `timeout_seconds`: wall
    time of one call. `cpu_seconds`: CPU time per process (RLIMIT_CPU).
    `memory_bytes`: address space per process (RLIMIT_AS). `max_processes`:
    processes and threads at once (RLIMIT_NPROC). `disk_bytes`: size of the
    `/tmp` working folder. `output_bytes`: the most kept of stdout and of
    stderr, each (UTF-8 bytes). `finnhub_api_key`: passed in as
    `FINNHUB_API_KEY` when not empty. Raises `ValueError` (naming the
    variable) for a value out of range.
    """

    sandbox: Sandbox
    allowlist: EgressAllowlist = field(default_factory=EgressAllowlist)
    timeout_seconds: float = 10.0
    cpu_seconds: int = 5
    memory_bytes: int = 512 * 1024 * 1024
    max_processes: int = 16
    disk_bytes: int = 64 * 1024 * 1024
    output_bytes: int = 65_536
    finnhub_api_key: str = ""
    name: str = NAME

    def __post_init__(self) -> None:
        check_limits(
            timeout_seconds=self.timeout_seconds,
            cpu_seconds=self.cpu_seconds,
            memory_bytes=self.memory_bytes,
            max_processes=self.max_processes,
            disk_bytes=self.disk_bytes,
            output_bytes=self.output_bytes,
        )

    def __repr__(self) -> str:
        # The dataclass repr would print the Finnhub key.
        return f"ExecutePythonTool(timeout_seconds={self.timeout_seconds}, cpu_seconds={self.cpu_seconds})"

    def definition(self) -> dict[str, Any]:
        """The Messages API tool definition (`name`, `description`, `input_schema`)."""
        hosts = ", ".join(sorted(host for host, _ in self.allowlist.hosts))
        network = "There is no network."
        if hosts:
            network = f"The network reaches HTTPS to {hosts} only, through the proxy in https_proxy (urllib uses it)."
        if hosts and self.finnhub_api_key:
            network += " FINNHUB_API_KEY holds the Finnhub key."
        return EXECUTE_PYTHON.definition(
            "Run a short Python 3 program and get its stdout and stderr. Print results to stdout; "
            "print JSON (an object or a list, on one line or as the whole output) for data you will cite. "
            f"Limits: {self.timeout_seconds:g} s wall time, {self.cpu_seconds} s CPU, "
            f"{self.memory_bytes // (1024 * 1024)} MB memory, {self.output_bytes} bytes of output. "
            "Only the Python standard library is available. The working folder is an empty /tmp that "
            f"does not outlive the call; nothing else is writable. {network}"
        )

    def run(self, tool_input: dict[str, Any], *, user: Any) -> dict[str, Any]:
        """Run `tool_input["code"]` in the sandbox; `{"stdout": str, "stderr": str}` when it exits with status 0.

        Output is decoded as UTF-8 (bad bytes and NUL become U+FFFD), each
        stream cut at `output_bytes`; a cut is noted at the end of `stderr`
        (never cited), so `stdout` stays as printed. Raises `ToolError` for
        a bad input, a timeout, a limit hit, a non-zero exit (with the last
        line of stderr, e.g. `ZeroDivisionError: division by zero`), a
        signal, or a sandbox that did not start.
        """
        code = tool_input.get("code") if isinstance(tool_input, dict) else None
        if not isinstance(code, str) or not code.strip():
            raise ToolError("input.code must be a non-empty string")
        if len(code) > MAX_CODE_CHARS:
            raise ToolError(f"input.code is longer than {MAX_CODE_CHARS} characters")
        if "\x00" in code:
            raise ToolError("input.code contains a NUL character")
        try:
            source = code.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError("input.code is not valid Unicode text (a lone surrogate)") from None
        with tempfile.TemporaryFile() as stdin, self._egress() as socket_path:
            stdin.write(source)
            stdin.seek(0)
            return self._run(stdin, socket_path)

    @contextlib.contextmanager
    def _egress(self) -> Iterator[str | None]:
        """The host path of this call's proxy socket (None when nothing is allowed), removed afterwards."""
        if not self.allowlist:
            yield None
            return
        folder = tempfile.mkdtemp(prefix="silvia-egress-")
        owner = self.sandbox.run_as_uid
        try:
            if owner is not None:
                os.chown(folder, owner, owner)  # bwrap, running as `owner`, binds the socket from here
            with EgressProxy(self.allowlist, os.path.join(folder, "egress.sock"), socket_owner=owner) as proxy:
                yield proxy.path
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _run(self, stdin: IO[bytes], socket_path: str | None) -> dict[str, Any]:
        env = {"FINNHUB_API_KEY": self.finnhub_api_key} if self.finnhub_api_key else {}
        limits = [self.cpu_seconds, self.memory_bytes, MAX_FILE_BYTES, self.max_processes, MAX_OPEN_FILES]
        status_read, status_write = os.pipe()
        try:
            argv = self.sandbox.command(
                ["-I", "-S", "-B", "-X", "utf8", "-c", _BOOTSTRAP, *map(str, limits), EGRESS_SOCKET],
                disk_bytes=self.disk_bytes,
                status_fd=status_write,
                egress_socket=socket_path,
            )
            process = subprocess.Popen(  # noqa: S603 (fixed argv; the code comes on stdin)
                argv,
                env=env,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(status_write,),
                start_new_session=True,
                **self.sandbox.popen_options(),
            )
        except OSError as error:  # bwrap gone since the probe, or no process to be had
            os.close(status_read)
            logger.warning("execute_python: bwrap did not run (%s)", type(error).__name__)
            raise ToolError("execute_python is unavailable: the sandbox did not start") from None
        finally:
            os.close(status_write)
        # The reader owns the pipe and closes it.
        return self._wait(process, _CappedReader(os.fdopen(status_read, "rb"), 65_536))

    def _wait(self, process: subprocess.Popen[bytes], status_reader: _CappedReader) -> dict[str, Any]:
        assert process.stdout is not None and process.stderr is not None
        out, err = _CappedReader(process.stdout, self.output_bytes), _CappedReader(process.stderr, self.output_bytes)
        try:
            process.wait(timeout=self.timeout_seconds)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # bwrap leads the group; killing it takes the sandbox's pid
            # namespace, and every process the code started, down with it.
            _kill_group(process.pid)
            process.wait()
        for reader in (out, err, status_reader):
            reader.join(1.0)
        if timed_out:
            raise ToolError(f"execute_python timed out after {self.timeout_seconds:g} s (wall time)")
        status = _sandbox_status(status_reader.text())
        if "child-pid" not in status:
            logger.warning("execute_python: the sandbox did not start (bwrap exit status %s)", process.returncode)
            raise ToolError("execute_python is unavailable: the sandbox did not start")
        exit_code = status.get("exit-code", process.returncode)
        stdout, stderr = out.text(), err.text()
        if isinstance(exit_code, int) and exit_code > 128 and _is_signal(exit_code - 128):
            raise ToolError(_signal_reason(exit_code - 128, self))
        if exit_code != 0:
            raise ToolError(f"execute_python exited with status {exit_code}: {_last_line(stderr)}")
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
        with contextlib.suppress(OSError, ValueError), self._pipe:
            while chunk := os.read(self._pipe.fileno(), 65_536):
                room = self._cap - len(self._data)
                if len(chunk) > room:
                    self.cut = True
                self._data += chunk[: max(room, 0)]

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def text(self) -> str:
        return bytes(self._data).decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def _sandbox_status(text: str) -> dict[str, Any]:
    """bwrap's `--json-status-fd` lines merged: `child-pid` once the code started, `exit-code` at the end."""
    status: dict[str, Any] = {}
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            document = json.loads(line)
            if isinstance(document, dict):
                status.update(document)
    return status


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pid, signal.SIGKILL)


def _is_signal(number: int) -> bool:
    try:
        signal.Signals(number)
    except ValueError:
        return False
    return True


def _signal_reason(signum: int, tool: ExecutePythonTool) -> str:
    if signum == signal.SIGXCPU:
        return f"execute_python stopped: CPU time limit of {tool.cpu_seconds} s"
    if signum == signal.SIGXFSZ:
        return f"execute_python stopped: a file grew past {MAX_FILE_BYTES} bytes"
    if signum == signal.SIGKILL:
        return "execute_python was killed (SIGKILL: CPU or memory limit)"
    return f"execute_python crashed ({signal.Signals(signum).name})"


def _last_line(stderr: str) -> str:
    """The error a failed program printed last (at most 300 characters): the last line of its stderr that is
    neither indented (a traceback's frames and source) nor a traceback's header, which a process killed while
    it printed one leaves last (a fork bomb's children, ended with the sandbox); else its last line."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if not line[0].isspace() and line != "Traceback (most recent call last):"]
    last = (errors or lines)[-1].strip() if lines else ""
    return last[:300] if last else "no error message"


def check_limits(
    *,
    timeout_seconds: float,
    cpu_seconds: int,
    memory_bytes: int,
    max_processes: int,
    disk_bytes: int,
    output_bytes: int,
) -> None:
    """Raise `ValueError` naming the setting when a limit is out of its range (docs/configuration.md#tools)."""
    if not 0 < timeout_seconds <= 600:
        raise ValueError("EXECUTE_PYTHON_TIMEOUT_SECONDS must be more than 0 and at most 600")
    if not 1 <= cpu_seconds <= 600:
        raise ValueError("EXECUTE_PYTHON_CPU_SECONDS must be 1 to 600")
    if not 64 * 1024 * 1024 <= memory_bytes <= 64 * 1024**3:
        raise ValueError("EXECUTE_PYTHON_MEMORY_MB must be 64 to 65536")
    if not 2 <= max_processes <= 1024:
        raise ValueError("EXECUTE_PYTHON_MAX_PROCESSES must be 2 to 1024")
    if not 1024 * 1024 <= disk_bytes <= 64 * 1024**3:
        raise ValueError("EXECUTE_PYTHON_DISK_MB must be 1 to 65536")
    if not 1_024 <= output_bytes <= 16 * 1024 * 1024:
        raise ValueError("EXECUTE_PYTHON_OUTPUT_BYTES must be 1024 to 16777216")


def execute_python_tool() -> ExecutePythonTool | None:
    """The tool from settings (`EXECUTE_PYTHON_*`, `FINNHUB_API_KEY`, the egress allowlist); `None` unless
    `EXECUTE_PYTHON_ENABLED` is true and the sandbox starts here (the tool is then not offered).

    Raises `ImproperlyConfigured` naming the variable when a value is out of range.
    """
    if not getattr(settings, "EXECUTE_PYTHON_ENABLED", False):
        return None
    limits = {
        "timeout_seconds": settings.EXECUTE_PYTHON_TIMEOUT_SECONDS,
        "cpu_seconds": settings.EXECUTE_PYTHON_CPU_SECONDS,
        "memory_bytes": settings.EXECUTE_PYTHON_MEMORY_MB * 1024 * 1024,
        "max_processes": settings.EXECUTE_PYTHON_MAX_PROCESSES,
        "disk_bytes": settings.EXECUTE_PYTHON_DISK_MB * 1024 * 1024,
        "output_bytes": settings.EXECUTE_PYTHON_OUTPUT_BYTES,
    }
    try:
        check_limits(**limits)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    allowlist = egress_allowlist()
    try:
        sandbox = find_sandbox(
            bwrap=settings.EXECUTE_PYTHON_BWRAP,
            interpreter=settings.EXECUTE_PYTHON_INTERPRETER,
            run_as_uid=settings.EXECUTE_PYTHON_SANDBOX_UID,
        )
    except SandboxUnavailable:  # logged by find_sandbox
        return None
    return ExecutePythonTool(
        sandbox=sandbox,
        allowlist=allowlist,
        finnhub_api_key=(getattr(settings, "FINNHUB_API_KEY", "") or "").strip(),
        **limits,
    )
