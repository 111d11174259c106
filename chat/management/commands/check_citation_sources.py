"""`python manage.py check_citation_sources [--batch-size N]` (docs/support.md#sources-that-change)."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from chat.source_checks import CHANGED, DEFAULT_BATCH_SIZE, GONE, check_citation_sources, rows_to_check


class Command(BaseCommand):
    help = (
        "Re-read the library documents stored citations cite by corpus path and report each citation whose "
        "document no longer has the digest its support was taken of (changed), or cannot be read (gone). "
        "Writes nothing; exits 1 when it finds any (docs/support.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=DEFAULT_BATCH_SIZE,
            help=f"rows read at a time (default {DEFAULT_BATCH_SIZE})",
        )

    def handle(self, *args: Any, batch_size: int, **options: Any) -> None:
        if batch_size < 1:
            raise CommandError(f"--batch-size must be a positive integer, not {batch_size}")
        # A bar on a terminal (tqdm, the rows that may cite a library document); nothing otherwise.
        with tqdm(
            total=rows_to_check().count(), unit="row", desc="check", file=sys.stderr, disable=not sys.stderr.isatty()
        ) as bar:
            report = check_citation_sources(batch_size=batch_size, on_batch=bar.update)
        for finding in report.findings:
            why = f": {finding.reason}" if finding.reason else ""
            self.stdout.write(
                f"{finding.outcome:<7} {finding.log_id} inline citation {finding.index}  {finding.source}{why}"
            )
        self.stdout.write(
            f"rows {report.rows_scanned}, documents {report.documents}; citations checked {report.checked}: "
            f"unchanged {report.unchanged}, changed {report.count(CHANGED)}, gone {report.count(GONE)}; "
            f"without a digest {report.without_digest}"
        )
        if report.findings:
            raise CommandError("some cited documents changed or are gone since they were cited", returncode=1)
