"""How a backfill run reads on a console: the progress display and the final report (docs/backfill.md).

Text only; the work is `chat.backfill.backfill_citation_targets`.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tqdm import tqdm

from chat.backfill import BackfillReport

__all__ = ["PLAIN_PROGRESS_SECONDS", "Progress", "format_report", "progress_line"]

PLAIN_PROGRESS_SECONDS = 5.0
"""Without a terminal, one progress line at most this often (and one at the end)."""


class Progress:
    """A tqdm bar (rows, rate, ETA) on a terminal; plain lines on stderr otherwise."""

    def __init__(self, total: int, stderr: Any) -> None:
        self.total = total
        self.stderr = stderr
        self.started = self.last_line = time.monotonic()
        self.bar = tqdm(
            total=total,
            unit="row",
            desc="backfill",
            file=sys.stderr,
            disable=not sys.stderr.isatty(),
            dynamic_ncols=True,
        )

    def update(self, report: BackfillReport) -> None:
        if not self.bar.disable:
            self.bar.update(report.rows_scanned - self.bar.n)
            self.bar.set_postfix(changed=report.rows_changed, refresh=False)
            return
        now = time.monotonic()
        if now - self.last_line >= PLAIN_PROGRESS_SECONDS:
            self.last_line = now
            self.stderr.write(progress_line(report, self.total, now - self.started))

    def close(self, report: BackfillReport) -> None:
        """End the bar, or write the last plain line (where the run stopped)."""
        if self.bar.disable:
            self.stderr.write(progress_line(report, self.total, time.monotonic() - self.started))
        self.bar.close()


def progress_line(report: BackfillReport, total: int, elapsed: float) -> str:
    """`backfill: 12000/100000 rows (12%), 4000 changed, 3100 rows/s, ETA 28s, after <id>`"""
    done = report.rows_scanned
    rate = done / elapsed if elapsed > 0 else 0.0
    percent = f" ({100 * done / total:.0f}%)" if total else ""
    eta = f", ETA {max(total - done, 0) / rate:.0f}s" if rate and total else ""
    verb = "would change" if report.dry_run else "changed"
    resume = f", after {report.last_id}" if report.last_id else ""
    return f"backfill: {done}/{total} rows{percent}, {report.rows_changed} {verb}, {rate:.0f} rows/s{eta}{resume}"


def format_report(report: BackfillReport) -> str:
    """The final report: rows, entries by outcome, malformed rows with their ids."""
    by_kind = ", ".join(f"{kind} {n}" for kind, n in sorted(report.typed.items())) or "none"
    verb = "would change" if report.dry_run else "changed"
    lines = [
        f"{'DRY RUN: nothing written. ' if report.dry_run else ''}"
        f"rows scanned {report.rows_scanned}, {verb} {report.rows_changed}",
        f"citations and inline citations typed {report.typed_total} ({by_kind}), already typed {report.already_typed}, "
        f"left untyped {report.left_untyped}",
        f"malformed rows skipped {len(report.malformed)}",
    ]
    lines.extend(f"  {row.id}: {row.reason}" for row in report.malformed)
    if not report.finished and report.last_id:
        lines.append(f"stopped after {report.last_id}")
    return "\n".join(lines)
