"""Timing helpers shared by the benchmarks (`get_session.py`, `derive.py`).

Times are wall-clock seconds from `time.perf_counter`; figures are printed in
milliseconds. p95 is the nearest-rank percentile (with 20 runs: the 19th
fastest), so it is always a time that was measured.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Timings:
    """The runs of one timed thing, in seconds."""

    runs: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def p95(self) -> float:
        ordered = sorted(self.runs)
        return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]

    def line(self, label: str, width: int = 44) -> str:
        """`label  median 12.3 ms  p95 14.0 ms` (milliseconds)."""
        return f"  {label:<{width}} median {self.median * 1000:9.2f} ms   p95 {self.p95 * 1000:9.2f} ms"


def time_once(fn: Callable[[], object]) -> float:
    """One call of `fn`, in seconds, after a full garbage collection (not timed).

    Collecting first keeps one run's garbage from being billed to the next.
    """
    gc.collect()
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def time_alternately(timed: dict[str, Callable[[], object]], *, runs: int, warmup: int = 2) -> dict[str, Timings]:
    """Time each callable `runs` times, taking turns, after `warmup` untimed rounds.

    Taking turns puts every callable under the same machine noise (other
    processes, CPU frequency) instead of giving one of them a quiet minute.
    """
    for _ in range(warmup):
        for fn in timed.values():
            fn()
    measured: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(runs):
        for name, fn in timed.items():
            measured[name].append(time_once(fn))
    return {name: Timings(tuple(values)) for name, values in measured.items()}


def ratio_line(subject: Timings, baseline: Timings, *, goal: float, what: str = "ratio") -> str:
    """`ratio (median) 1.23, p95 1.30 (goal <= 1.5: met)`."""
    ratio = subject.median / baseline.median
    met = "met" if ratio <= goal else "NOT MET"
    return f"  {what} (median/median) {ratio:.2f}, p95/p95 {subject.p95 / baseline.p95:.2f} (goal <= {goal:g}: {met})"


DEFAULT_SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"
"""The PostgreSQL server the benchmarks create their scratch databases on by default."""


def postgres_server_url(given: str | None) -> str:
    """The server to benchmark on: `given` (`--database-url`), else
    `DATABASE_URL` when it is a postgres:// URL, else `DEFAULT_SERVER_URL`."""
    import os

    url = given or os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://")) else DEFAULT_SERVER_URL
