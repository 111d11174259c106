"""Benchmark: what a process pays to start (issue 21, item 2; docs/benchmarks.md).

    .venv/bin/python bench/startup.py [--rounds 7]

Three commands, each a fresh child process, taking turns round after round
(after one untimed warm-up round), so all three meet the same machine noise:

- baseline: `manage.py check` of a bare `django-admin startproject` with the
  same installed apps as ours minus ours (Django's six, `rest_framework`,
  `rest_framework.authtoken`, `drf_spectacular`), on SQLite;
- check: our `manage.py check` (settings from the environment, SQLite);
- import one: our `manage.py import_turns` of one record (an example turn with
  fresh ids, so each round really writes it) into a migrated SQLite database.

Each is measured as CPU seconds (user + system of the child, `os.wait4`) and
wall seconds. Goals: `check` at most 1.5x the baseline (CPU median over
median); `import_turns` of one record under 1 s of CPU. No PostgreSQL needed;
everything lives in a temporary folder removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

GOAL_CHECK_RATIO = 1.5
GOAL_IMPORT_CPU = 1.0
BARE_APPS = "    'rest_framework',\n    'rest_framework.authtoken',\n    'drf_spectacular',\n"


def _run(command: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one child process; raises when it fails."""
    import time

    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode() if process.stderr else ""
    if process.stderr:
        process.stderr.close()
    if process.returncode:
        raise RuntimeError(f"{' '.join(command)} exited with {process.returncode}:\n{stderr}")
    return usage.ru_utime + usage.ru_stime, wall


def bare_project(folder: Path) -> Path:
    """`django-admin startproject bare` with our third-party apps added; returns its folder."""
    project = folder / "bare"
    project.mkdir()
    django_admin = [sys.executable, "-m", "django", "startproject", "bare", str(project)]
    subprocess.run(django_admin, check=True)
    settings = project / "bare" / "settings.py"
    text = settings.read_text()
    anchor = "    'django.contrib.staticfiles',\n"
    if anchor not in text:
        raise RuntimeError("startproject's settings changed: cannot add the apps")
    settings.write_text(text.replace(anchor, anchor + BARE_APPS, 1))
    return project


def one_record(folder: Path, round_: int) -> Path:
    """An example turn with fresh record and session ids, as a one-record .json file."""
    records = json.loads((ROOT / "examples" / "turns" / "02-roth-ira.json").read_text())
    record: dict[str, Any] = records[0] if isinstance(records, list) else records
    record = {**record, "id": str(uuid.uuid4()), "session": {**record["session"], "id": str(uuid.uuid4())}}
    path = folder / f"one-{round_}.json"
    path.write_text(json.dumps(record))
    return path


def _summary(label: str, values: list[float]) -> str:
    return f"  {label:<36} median {statistics.median(values):6.3f} s   range {min(values):6.3f}-{max(values):6.3f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (default 7, at least 5)")
    args = parser.parse_args(argv)
    if args.rounds < 5:
        parser.error("--rounds must be at least 5")

    folder = Path(tempfile.mkdtemp(prefix="silvia-bench-startup-"))
    try:
        bare = bare_project(folder)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_"))}
        bare_env = {**env, "DJANGO_SETTINGS_MODULE": "bare.settings"}
        ours_env = {
            **env,
            "DJANGO_SETTINGS_MODULE": "silvia.settings",
            "DJANGO_DEBUG": "true",  # as the bare project (startproject sets DEBUG = True)
            "DATABASE_URL": f"sqlite:///{folder / 'ours.sqlite3'}",
            "DJANGO_LOG_LEVEL": "WARNING",
        }
        manage = [sys.executable, "manage.py"]
        _run([*manage, "migrate", "--no-input", "-v", "0"], cwd=ROOT, env=ours_env)
        make_user = "from django.contrib.auth.models import User; User.objects.create(username='maya')"
        _run([*manage, "shell", "-c", make_user], cwd=ROOT, env=ours_env)

        sides: dict[str, tuple[list[str], Path, dict[str, str]]] = {
            "baseline: bare project, check": ([*manage, "check"], bare, bare_env),
            "ours: check": ([*manage, "check"], ROOT, ours_env),
        }
        cpu: dict[str, list[float]] = {name: [] for name in [*sides, "ours: import_turns of one record"]}
        wall: dict[str, list[float]] = {name: [] for name in cpu}
        for round_ in range(args.rounds + 1):
            runs = [(name, command, cwd, side_env) for name, (command, cwd, side_env) in sides.items()]
            record = one_record(folder, round_)
            runs.append(("ours: import_turns of one record", [*manage, "import_turns", str(record)], ROOT, ours_env))
            for name, command, cwd, side_env in runs:
                used, elapsed = _run(command, cwd=cwd, env=side_env)
                if round_:  # round 0 warms the disk cache and .pyc files
                    cpu[name].append(used)
                    wall[name].append(elapsed)

        print(f"start-up, {args.rounds} rounds taking turns (CPU = user + system of the child)")
        for name in cpu:
            print(_summary(f"{name}, CPU", cpu[name]))
            print(_summary(f"{name}, wall", wall[name]))
        base, check = (statistics.median(cpu[name]) for name in sides)
        ratio = check / base
        print(
            f"  check / bare check (CPU, median/median) {ratio:.2f} "
            f"(goal <= {GOAL_CHECK_RATIO:g}: {'met' if ratio <= GOAL_CHECK_RATIO else 'NOT MET'})"
        )
        one = statistics.median(cpu["ours: import_turns of one record"])
        print(
            f"  import_turns of one record: {one:.3f} s of CPU, {one / base:.2f}x the bare check "
            f"(goal < {GOAL_IMPORT_CPU:g} s: {'met' if one < GOAL_IMPORT_CPU else 'NOT MET'})"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
