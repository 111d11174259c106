"""The bubblewrap sandbox `execute_python` runs model-written code in (docs/sandbox.md).

`find_sandbox(...)` checks once per process that bubblewrap can start a
confined interpreter here (bwrap installed, user namespaces allowed, an
interpreter the sandbox's uid can read) and returns a `Sandbox`, or the
reason it cannot (`SandboxUnavailable`); the tool is then not offered. There
is no unconfined fallback anywhere.

`Sandbox.command(...)` builds the `bwrap` argv: every namespace unshared (user,
pid, net, ipc, uts, cgroup), uid/gid 65534 inside, no capabilities, no
further user namespaces, a new session, a read-only root holding only the
system libraries, the interpreter and its standard library (plus the CA
bundle and time zones), a fresh `/proc` and minimal read-only `/dev`, and one
writable place: a size-capped tmpfs at `/tmp`, the working folder. When the
service runs as root, bwrap itself runs as `run_as_uid` (nobody by default),
so that the sandbox's processes are an unprivileged uid outside too and
RLIMIT_NPROC holds (the kernel does not count root's processes).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EGRESS_SOCKET",
    "SANDBOX_UID",
    "WORKDIR",
    "Sandbox",
    "SandboxUnavailable",
    "find_sandbox",
]

logger = logging.getLogger(__name__)

#: The uid and gid the code runs as inside the sandbox (`nobody`).
SANDBOX_UID = 65534
#: The working folder inside: a fresh tmpfs, the only writable place.
WORKDIR = "/tmp"  # noqa: S108 - a path inside the sandbox, on its own tmpfs
#: Where the egress proxy's Unix socket is bound inside (docs/sandbox.md#network).
EGRESS_SOCKET = "/run/egress.sock"

# System libraries the interpreter links against. On a merged-/usr system
# `/lib` and `/lib64` are symlinks, recreated as such; otherwise bound.
_LIBRARY_DIRS = ("/usr/lib", "/usr/lib64", "/usr/lib32")
_TOP_LEVEL_LIBS = ("/lib", "/lib64", "/lib32")
# Public, read-only data a finance script may need: the CA bundle (HTTPS to
# the allowlisted hosts) and the time zone database. Bound when present.
_DATA_DIRS = ("/etc/ssl/certs", "/usr/share/ca-certificates", "/usr/share/zoneinfo")
# Interpreters tried, after the service's own, when none is configured.
_FALLBACK_INTERPRETERS = ("/usr/bin/python3",)
# Asks an interpreter (outside the sandbox, run by the operator's config) where its files are.
_DESCRIBE = """\
import json, os, sys, sysconfig
paths = sysconfig.get_paths()
shared = sysconfig.get_config_var("Py_ENABLE_SHARED")
soname = sysconfig.get_config_var("INSTSONAME") if shared else None
libdir = sysconfig.get_config_var("LIBDIR")
print(json.dumps({
    "executable": os.path.realpath(sys.executable),
    "dirs": sorted({os.path.realpath(paths["stdlib"]), os.path.realpath(paths["platstdlib"])}),
    "files": [os.path.join(libdir, soname)] if soname and libdir else [],
}))
"""
_PROBE_CODE = "import os; print('sandbox-ok', os.getuid())"
_PROBE_RETRY_SECONDS = 60.0


class SandboxUnavailable(Exception):
    """bubblewrap cannot start a confined interpreter here; `reason` says why (no secret in it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Sandbox:
    """A checked bubblewrap setup.

    `bwrap`: the binary's path. `interpreter`: the real path of the Python
    run inside. `binds`: host paths bound read-only at the same path for that
    interpreter (its standard library, libpython) beyond the system
    libraries. `run_as_uid`: the uid bwrap runs as (the service is root),
    else None (bwrap runs as the service's own uid, in its own user namespace).
    """

    bwrap: str
    interpreter: str
    binds: tuple[str, ...] = ()
    run_as_uid: int | None = None

    def command(
        self, interpreter_args: list[str], *, disk_bytes: int, status_fd: int, egress_socket: str | None
    ) -> list[str]:
        """The argv running `interpreter interpreter_args...` confined.

        `disk_bytes`: size of the `/tmp` tmpfs. `status_fd`: bwrap writes its
        JSON status there (`child-pid` once the code runs, then `exit-code`).
        `egress_socket`: a host Unix socket bound at `EGRESS_SOCKET`, or None
        for no network at all.
        """
        argv = [self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"]
        argv += ["--new-session", "--cap-drop", "ALL", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        argv += ["--hostname", "sandbox", "--json-status-fd", str(status_fd)]
        for path in _LIBRARY_DIRS:
            argv += ["--ro-bind-try", path, path]
        for path in _TOP_LEVEL_LIBS:
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            else:
                argv += ["--ro-bind-try", path, path]
        for path in (*_DATA_DIRS, *self.binds):
            argv += ["--ro-bind-try", path, path]
        argv += ["--ro-bind", self.interpreter, self.interpreter]
        argv += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
        argv += ["--size", str(disk_bytes), "--tmpfs", WORKDIR, "--chdir", WORKDIR]
        if egress_socket is not None:
            argv += ["--dir", os.path.dirname(EGRESS_SOCKET), "--bind", egress_socket, EGRESS_SOCKET]
        argv += ["--remount-ro", "/", "--", self.interpreter, *interpreter_args]
        return argv

    def popen_options(self) -> dict[str, Any]:
        """Extra `subprocess.Popen` arguments: drop to `run_as_uid` (no supplementary groups) when set."""
        if self.run_as_uid is None:
            return {}
        return {"user": self.run_as_uid, "group": self.run_as_uid, "extra_groups": []}

    def run(self, code: str, *, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
        """Run `code` (`python -I -S -c`) confined, with no network; for the start-up probe."""
        read_fd, write_fd = os.pipe()
        try:
            args = ["-I", "-S", "-B", "-c", code]
            argv = self.command(args, disk_bytes=1 << 20, status_fd=write_fd, egress_socket=None)
            return subprocess.run(  # noqa: S603 - fixed argv
                argv,
                env={},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                pass_fds=(write_fd,),
                check=False,
                **self.popen_options(),
            )
        finally:
            os.close(write_fd)
            os.close(read_fd)


def _describe_interpreter(executable: str) -> tuple[str, tuple[str, ...]]:
    """(real path, extra read-only binds) of a Python interpreter; raises SandboxUnavailable."""
    try:
        done = subprocess.run(  # noqa: S603 - the operator's interpreter, our own code
            [executable, "-I", "-S", "-c", _DESCRIBE], env={}, capture_output=True, text=True, timeout=20, check=False
        )
        described = json.loads(done.stdout)
    except (OSError, ValueError, subprocess.SubprocessError):
        raise SandboxUnavailable(f"the interpreter {executable} did not run") from None
    real = described["executable"]
    binds = tuple(
        path
        for path in (*described["dirs"], *described["files"])
        if not any(path == top or path.startswith(top + "/") for top in _LIBRARY_DIRS)
    )
    return real, binds


def _try_sandbox(bwrap: str, interpreter: str, run_as_uid: int | None) -> Sandbox:
    real, binds = _describe_interpreter(interpreter)
    sandbox = Sandbox(bwrap=bwrap, interpreter=real, binds=binds, run_as_uid=run_as_uid)
    try:
        done = sandbox.run(_PROBE_CODE)
    except (OSError, subprocess.SubprocessError) as error:
        raise SandboxUnavailable(f"bwrap did not run ({type(error).__name__})") from None
    if done.returncode != 0 or done.stdout.split() != ["sandbox-ok", str(SANDBOX_UID)]:
        # bwrap's own message names the failing step (no user namespaces, a
        # path the sandbox's uid cannot reach); it holds no user data.
        detail = (done.stderr.strip().splitlines() or ["no message"])[-1][:200]
        raise SandboxUnavailable(f"bwrap could not start {real} confined: {detail}")
    return sandbox


_cache: dict[tuple[Any, ...], tuple[float, Sandbox | SandboxUnavailable | None]] = {}
_cache_lock = threading.Lock()


def find_sandbox(*, bwrap: str = "bwrap", interpreter: str = "", run_as_uid: int = SANDBOX_UID) -> Sandbox:
    """A working sandbox, checked by running a probe in it; raises `SandboxUnavailable`.

    `bwrap`: a path or a name looked up on PATH. `interpreter`: the Python to
    run inside; empty tries the service's own base interpreter, then
    `/usr/bin/python3`. `run_as_uid`: the uid bwrap runs as when the service
    is root (ignored otherwise). The answer is cached per process (a failure
    is logged as a warning, and retried after a minute).
    """
    key = (bwrap, interpreter, run_as_uid)
    with _cache_lock:
        checked_at, result = _cache.get(key, (0.0, None))
        if result is None or (
            isinstance(result, SandboxUnavailable) and time.monotonic() - checked_at >= _PROBE_RETRY_SECONDS
        ):
            try:
                result = _find(bwrap, interpreter, run_as_uid)
            except SandboxUnavailable as unavailable:
                # Once per probe (a minute at most), not on every turn.
                logger.warning("execute_python is not offered: %s", unavailable.reason)
                result = unavailable
            _cache[key] = (time.monotonic(), result)
    if isinstance(result, SandboxUnavailable):
        raise result
    return result


def _find(bwrap: str, interpreter: str, run_as_uid: int) -> Sandbox:
    found = shutil.which(bwrap)
    if found is None:
        raise SandboxUnavailable(f"bubblewrap ({bwrap}) is not installed")
    uid = run_as_uid if os.geteuid() == 0 else None
    if uid == 0:
        raise SandboxUnavailable("EXECUTE_PYTHON_SANDBOX_UID must not be 0")
    if interpreter:
        return _try_sandbox(found, interpreter, uid)
    candidates = [getattr(sys, "_base_executable", "") or sys.executable, *_FALLBACK_INTERPRETERS]
    reasons = []
    for candidate in dict.fromkeys(candidates):
        if not os.path.exists(candidate):
            continue
        try:
            return _try_sandbox(found, candidate, uid)
        except SandboxUnavailable as unavailable:
            reasons.append(unavailable.reason)
    raise SandboxUnavailable("; ".join(reasons) or "no Python interpreter found")
