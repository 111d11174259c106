"""Benchmark: what the `execute_python` sandbox and the SQLite call guards cost (issue 20).

    .venv/bin/python bench/sandbox.py [--runs 10]

Taking turns, `--runs` times each (medians and ranges, in milliseconds):

1. **execute_python**, one call of a small finance script (360 months of an
   amortisation schedule, printed as JSON):
   - *sandbox*: `ExecutePythonTool.run` in its bubblewrap sandbox;
   - *sandbox + proxy*: the same with a Finnhub key, so the call also starts
     and stops its egress proxy (the code does not use it);
   - *unconfined* (baseline): the same interpreter, flags, bootstrap, limits
     and code on stdin as a plain subprocess in a temporary folder, which is
     how the tool ran before the sandbox.
2. **SQLite guards**, one query over 10,000 rows calling `printf` once per row
   on an in-memory connection:
   - *guarded*: with `printf` routed through the checks (`_Guards`) and the
     progress handler every `PROGRESS_STEPS` (100) steps;
   - *SQLite's own* (baseline): the same connection without the guards, the
     handler every 1,000 steps (before issue 20).

No goal: the figures say what the boundary costs per call.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "silvia.settings")

CODE = """\
import json
balance, rate, payment = 300000.0, 0.065 / 12, 1896.20
months = []
for month in range(1, 361):
    interest = balance * rate
    balance = max(0.0, balance - (payment - interest))
    months.append({"month": month, "interest": round(interest, 2), "balance": round(balance, 2)})
print(json.dumps({"months": len(months), "total_interest": round(sum(m["interest"] for m in months), 2)}))
"""
ROWS = 10_000
QUERY = (
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < ?) "
    "SELECT count(*), max(length(printf('%08.2f|%d', n * 1.5, n))) FROM r"
)


def alternate(timed: dict[str, Callable[[], object]], runs: int) -> dict[str, list[float]]:
    """Each callable `runs` times, taking turns, after one untimed round; seconds."""
    for fn in timed.values():
        fn()
    measured: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(runs):
        for name, fn in timed.items():
            started = time.perf_counter()
            fn()
            measured[name].append(time.perf_counter() - started)
    return measured


def report(measured: dict[str, list[float]], baseline: str) -> None:
    """One line per name: median, range, and the median's ratio to `baseline`'s."""
    base = statistics.median(measured[baseline])
    for name, values in measured.items():
        median = statistics.median(values)
        low, high = min(values) * 1000, max(values) * 1000
        print(f"  {name:<22} median {median * 1000:8.2f} ms   range {low:8.2f}-{high:8.2f} ms   {median / base:5.2f}x")


def bench_execute_python(runs: int) -> None:
    from tools.egress import FINNHUB_HOST, EgressAllowlist
    from tools.python import _BOOTSTRAP, MAX_FILE_BYTES, MAX_OPEN_FILES, ExecutePythonTool
    from tools.sandbox import find_sandbox

    sandbox = find_sandbox()
    tool = ExecutePythonTool(sandbox=sandbox)
    with_proxy = ExecutePythonTool(
        sandbox=sandbox, allowlist=EgressAllowlist(hosts=frozenset({FINNHUB_HOST})), finnhub_api_key="bench"
    )
    limits = [tool.cpu_seconds, tool.memory_bytes, MAX_FILE_BYTES, tool.max_processes, MAX_OPEN_FILES]
    argv = [sandbox.interpreter, "-I", "-S", "-B", "-X", "utf8", "-c", _BOOTSTRAP, *map(str, limits), "/nonexistent"]
    expected = tool.run({"code": CODE}, user=None)["stdout"]

    def unconfined() -> None:
        folder = tempfile.mkdtemp(prefix="bench-python-")
        try:
            done = subprocess.run(argv, input=CODE.encode(), capture_output=True, cwd=folder, env={}, check=True)
            assert done.stdout.decode() == expected
        finally:
            shutil.rmtree(folder)

    def sandboxed() -> None:
        assert tool.run({"code": CODE}, user=None)["stdout"] == expected

    def sandboxed_with_proxy() -> None:
        assert with_proxy.run({"code": CODE}, user=None)["stdout"] == expected

    print(f"execute_python: one call ({sandbox.interpreter}), {runs} runs each")
    measured = alternate(
        {"sandbox": sandboxed, "sandbox + proxy": sandboxed_with_proxy, "unconfined": unconfined}, runs
    )
    report(measured, "unconfined")


def bench_sqlite_guards(runs: int) -> None:
    from finance.sql_sqlite import PROGRESS_STEPS
    from finance.sql_sqlite_calls import CallGuards as _Guards

    plain = sqlite3.connect(":memory:", check_same_thread=False)
    guarded = sqlite3.connect(":memory:", check_same_thread=False)
    guards = _Guards()
    guards.install(guarded)

    def run(connection: sqlite3.Connection, steps: int, armed: bool) -> Callable[[], object]:
        def query() -> object:
            deadline = time.monotonic() + 60
            if armed:
                guards.arm(deadline=deadline, timeout_ms=60_000, max_chars=65_536)
            connection.set_progress_handler(lambda: int(time.monotonic() > deadline), steps)
            return connection.execute(QUERY, (ROWS,)).fetchone()

        return query

    expected = run(plain, 1000, False)()
    assert run(guarded, PROGRESS_STEPS, True)() == expected
    print(f"\nSQLite: printf over {ROWS:,} rows, {runs} runs each")
    measured = alternate({"guarded": run(guarded, PROGRESS_STEPS, True), "SQLite's own": run(plain, 1000, False)}, runs)
    report(measured, "SQLite's own")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    import django

    from bench._django import use_bench_settings

    use_bench_settings()
    django.setup()
    bench_execute_python(args.runs)
    bench_sqlite_guards(args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
