"""Timing helpers shared by the benchmarks.

Times are wall-clock seconds from `time.perf_counter`; figures are printed in
milliseconds. Every figure is a median with its range (the fastest and the
slowest run), so a reader sees how much the machine moved while it ran.

Product and floor are timed in rounds (`time_alternately`): each round runs
every side once, and the order flips from one round to the next, so load
from other processes hits both sides alike and neither always runs right
after the other. A ratio (`Ratio`) is the ratio of the two medians, and its
range is the spread of the per-round ratios.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MIN_ROUNDS = 5
"""No ratio is printed from fewer rounds than this."""


@dataclass(frozen=True, slots=True)
class Timings:
    """The runs of one timed thing, in seconds, in the order they ran (one per round)."""

    runs: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def low(self) -> float:
        return min(self.runs)

    @property
    def high(self) -> float:
        return max(self.runs)

    @property
    def p95(self) -> float:
        """Nearest rank, so always a time that was measured."""
        ordered = sorted(self.runs)
        return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]

    def line(self, label: str, width: int = 44) -> str:
        """`label  median 12.30 ms  range 11.90-15.20 ms` (milliseconds)."""
        return (
            f"  {label:<{width}} median {self.median * 1000:9.2f} ms   "
            f"range {self.low * 1000:.2f}-{self.high * 1000:.2f} ms   ({len(self.runs)} runs)"
        )

    def minus(self, other: Timings) -> Timings:
        """Per round, this run minus `other`'s run of the same round (time beyond `other`)."""
        return Timings(tuple(a - b for a, b in zip(self.runs, other.runs, strict=True)))


@dataclass(frozen=True, slots=True)
class Ratio:
    """subject/baseline: the ratio of the medians, with the range of the per-round ratios."""

    value: float
    low: float
    high: float
    rounds: int

    @classmethod
    def of(cls, subject: Timings, baseline: Timings) -> Ratio:
        per_round = [s / b for s, b in zip(subject.runs, baseline.runs, strict=True) if b > 0]
        if not per_round:
            per_round = [math.inf]
        return cls(subject.median / baseline.median if baseline.median > 0 else math.inf, min(per_round),
                   max(per_round), len(subject.runs))  # fmt: skip

    @classmethod
    def inverse(cls, subject: Timings, baseline: Timings) -> Ratio:
        """baseline/subject: for rates (turns/s, rows/s), where higher is better."""
        per_round = [b / s for s, b in zip(subject.runs, baseline.runs, strict=True) if s > 0]
        return cls(baseline.median / subject.median, min(per_round), max(per_round), len(subject.runs))

    def text(self, *, goal: float | None = None, at_least: bool = False) -> str:
        """`1.23 (per-round range 1.10-1.40; goal <= 1.5: met)`."""
        verdict = ""
        if goal is not None:
            met = self.value >= goal if at_least else self.value <= goal
            sign = ">=" if at_least else "<="
            verdict = f"; goal {sign} {goal:.3g}: {'met' if met else 'NOT MET'}"
        return f"{self.value:.2f} (per-round range {self.low:.2f}-{self.high:.2f}, {self.rounds} rounds{verdict})"


def time_once(fn: Callable[[], object]) -> float:
    """One call of `fn`, in seconds, after a full garbage collection (not timed).

    Collecting first keeps one run's garbage from being billed to the next.
    """
    gc.collect()
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def time_alternately(
    timed: dict[str, Callable[[], object]], *, runs: int, warmup: int = 2, collect: bool = True
) -> dict[str, Timings]:
    """Time each callable `runs` times (at least `MIN_ROUNDS`) in rounds, after `warmup` untimed rounds.

    Each round calls every callable once; odd rounds run them in reverse
    order. `collect=False` skips the untimed `gc.collect()` before each call
    (for calls of a few milliseconds over HTTP, where the client's garbage is
    negligible and a full collection costs more than the call).
    """
    runs = max(runs, MIN_ROUNDS)
    names: Sequence[str] = list(timed)
    for _ in range(warmup):
        for fn in timed.values():
            fn()
    measured: dict[str, list[float]] = {name: [] for name in names}
    for round_number in range(runs):
        order = names if round_number % 2 == 0 else list(reversed(names))
        for name in order:
            if collect:
                measured[name].append(time_once(timed[name]))
            else:
                started = time.perf_counter()
                timed[name]()
                measured[name].append(time.perf_counter() - started)
    return {name: Timings(tuple(values)) for name, values in measured.items()}


def ratio_line(subject: Timings, baseline: Timings, *, goal: float, what: str = "ratio") -> str:
    """`  what 1.23 (per-round range 1.10-1.40, 10 rounds; goal <= 1.5: met)`."""
    return f"  {what} {Ratio.of(subject, baseline).text(goal=goal)}"


DEFAULT_SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"
"""The PostgreSQL server the benchmarks create their scratch databases on by default."""


def postgres_server_url(given: str | None) -> str:
    """The server to benchmark on: `given` (`--database-url`), else
    `DATABASE_URL` when it is a postgres:// URL, else `DEFAULT_SERVER_URL`."""
    import os

    url = given or os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://")) else DEFAULT_SERVER_URL
