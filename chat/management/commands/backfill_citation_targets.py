"""`python manage.py backfill_citation_targets [--batch-size N] [--dry-run] [--after PK]`"""
from __future__ import annotations

import sys
import time
import uuid

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from chat.backfill import DEFAULT_BATCH_SIZE, BackfillReport, backfill_citation_targets, count_rows_to_scan
from chat.models import ChatLog

PLAIN_PROGRESS_SECONDS = 5.0
"""Without a terminal, one progress line at most this often (and one at the end)."""


class Command(BaseCommand):
    help = (
        "Type the citations of old ai_chat_logs rows whose source alone determines the target (SPEC section 12), "
        "in primary-key batches, each its own short transaction. Safe on a live table, resumable (--after, or "
        "simply run it again) and idempotent. Malformed rows are reported by id and left untouched."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help=f"rows per batch and transaction (default {DEFAULT_BATCH_SIZE})")
        parser.add_argument("--dry-run", action="store_true", help="count what would change; lock and write nothing")
        parser.add_argument("--after", metavar="PK", help="start after this ai_chat_logs id (the last id a stopped run reported)")

    def handle(self, *args, batch_size: int, dry_run: bool, after: str | None, **options) -> None:
        if batch_size < 1:
            raise CommandError(f"--batch-size must be a positive integer, not {batch_size}")
        if after is not None:
            try:
                after = str(uuid.UUID(after))
            except ValueError:
                raise CommandError(f"--after must be an ai_chat_logs id (a UUID), not {after!r}") from None

        total = count_rows_to_scan(model=ChatLog, after=after)
        progress = _Progress(total, self.stderr)
        report = BackfillReport(dry_run=dry_run)

        def on_batch(running: BackfillReport) -> None:
            nonlocal report
            report = running
            progress.update(running)

        try:
            report = backfill_citation_targets(model=ChatLog, batch_size=batch_size, after=after, dry_run=dry_run, on_batch=on_batch)
        except KeyboardInterrupt:
            progress.close(report)
            self.stdout.write(format_report(report))
            resume = f" --after {report.last_id}" if report.last_id else ""
            raise CommandError(f"interrupted; committed batches stay done. Resume with: backfill_citation_targets{resume}", returncode=130) from None
        progress.close(report)
        self.stdout.write(format_report(report))


class _Progress:
    """A tqdm bar (rows, rate, ETA) on a terminal; plain lines on stderr otherwise."""

    def __init__(self, total: int, stderr) -> None:
        self.total = total
        self.stderr = stderr
        self.started = self.last_line = time.monotonic()
        self.bar = tqdm(total=total, unit="row", desc="backfill", file=sys.stderr, disable=not sys.stderr.isatty(), dynamic_ncols=True)

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
        f"{'DRY RUN: nothing written. ' if report.dry_run else ''}rows scanned {report.rows_scanned}, {verb} {report.rows_changed}",
        f"citations and inline citations typed {report.typed_total} ({by_kind}), already typed {report.already_typed}, "
        f"left untyped {report.left_untyped}",
        f"malformed rows skipped {len(report.malformed)}",
    ]
    lines.extend(f"  {row.id}: {row.reason}" for row in report.malformed)
    if not report.finished and report.last_id:
        lines.append(f"stopped after {report.last_id}")
    return "\n".join(lines)
