"""`python manage.py backfill_citation_targets [--batch-size N] [--dry-run] [--after PK]` (docs/backfill.md)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from chat.backfill import DEFAULT_BATCH_SIZE, BackfillReport, backfill_citation_targets, count_rows_to_scan
from chat.backfill.text import Progress, format_report
from chat.models import ChatLog


class Command(BaseCommand):
    help = (
        "Type the citations of old ai_chat_logs rows whose source alone determines the target (docs/backfill.md), "
        "in primary-key batches, each its own short transaction. Safe on a live table, resumable (--after, or "
        "simply run it again) and idempotent. Malformed rows are reported by id and left untouched."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=DEFAULT_BATCH_SIZE,
            help=f"rows per batch and transaction (default {DEFAULT_BATCH_SIZE})",
        )
        parser.add_argument("--dry-run", action="store_true", help="count what would change; lock and write nothing")
        parser.add_argument(
            "--after", metavar="PK", help="start after this ai_chat_logs id (the last id a stopped run reported)"
        )

    def handle(self, *args: Any, batch_size: int, dry_run: bool, after: str | None, **options: Any) -> None:
        if batch_size < 1:
            raise CommandError(f"--batch-size must be a positive integer, not {batch_size}")
        try:
            total = count_rows_to_scan(model=ChatLog, after=after)
        except ValueError:
            raise CommandError(f"--after must be an ai_chat_logs id (a UUID), not {after!r}") from None
        progress = Progress(total, self.stderr)
        report = BackfillReport(dry_run=dry_run)

        def on_batch(running: BackfillReport) -> None:
            nonlocal report
            report = running
            progress.update(running)

        try:
            report = backfill_citation_targets(
                model=ChatLog, batch_size=batch_size, after=after, dry_run=dry_run, on_batch=on_batch
            )
        except KeyboardInterrupt:
            progress.close(report)
            self.stdout.write(format_report(report))
            resume = f" --after {report.last_id}" if report.last_id else ""
            raise CommandError(
                f"interrupted; committed batches stay done. Resume with: backfill_citation_targets{resume}",
                returncode=130,
            ) from None
        progress.close(report)
        self.stdout.write(format_report(report))
