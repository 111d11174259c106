"""`python manage.py import_turns PATH... [--user NAME] [--create-users] [--batch-size N] [limits]`.

Arguments and printing only; the work is `chat.imports.importer.TurnImporter`.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from chat.imports.files import TurnFileError, count_lines, read_turn_records
from chat.imports.importer import TurnImporter, import_user
from chat.services import TurnLimits
from citations.turn import TurnRecordError

PLAIN_PROGRESS_EVERY = 1000


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


class Command(BaseCommand):
    help = (
        "Import recorded turns (docs/turns.md) from .json files (one record or a list) and .jsonl files "
        "(one record a line). A bad record is reported with file, line and JSON path; the others are still "
        "imported. Exit status 1 when any record failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "paths", nargs="+", type=Path, help="files, or folders whose .json/.jsonl files are read in name order"
        )
        parser.add_argument("--user", help="owner of every imported turn, instead of each record's 'user'")
        parser.add_argument("--create-users", action="store_true", help="create users that do not exist yet")
        parser.add_argument(
            "--batch-size",
            type=_positive,
            default=settings.IMPORT_BATCH_SIZE,
            help="records per transaction (default %(default)s)",
        )
        parser.add_argument(
            "--max-record-bytes",
            type=_positive,
            default=settings.IMPORT_MAX_RECORD_BYTES,
            help="largest record in the file, bytes (default %(default)s)",
        )
        parser.add_argument(
            "--max-text-chars",
            type=_positive,
            default=settings.TURN_MAX_TEXT_CHARS,
            help="longest user_message or answer, characters (default %(default)s)",
        )
        parser.add_argument(
            "--max-tool-rows",
            type=_positive,
            default=settings.TURN_MAX_TOOL_ROWS,
            help="most rows in one execute_sql output (default %(default)s)",
        )

    def handle(self, *args: Any, paths: list[Path], user: str | None, create_users: bool, **options: Any) -> None:
        # What start-up loaded lives as long as the process: keep the cyclic
        # collector from walking it again on each of the many collections an
        # import's small objects cause (about a third of the import's CPU,
        # bench/README.md "import_turns").
        gc.collect()
        gc.freeze()
        files = self._expand(paths)
        try:
            override = import_user(user, create=create_users, where="--user") if user is not None else None
        except TurnRecordError as error:
            raise CommandError(str(error), returncode=1) from None
        importer = TurnImporter(
            report=self.stderr.write,
            user=override,
            create_users=create_users,
            batch_size=options["batch_size"],
            limits=TurnLimits(max_text_chars=options["max_text_chars"], max_tool_rows=options["max_tool_rows"]),
        )
        for path in files:
            self._import_file(importer, path, options["max_record_bytes"])
        importer.finish()
        self.stdout.write(importer.summary())
        if importer.counts["failed"]:
            raise CommandError(f"{importer.counts['failed']} record(s) failed", returncode=1)

    def _expand(self, paths: list[Path]) -> list[Path]:
        files = []
        for path in paths:
            if path.is_dir():
                files.extend(sorted(p for p in path.iterdir() if p.suffix.lower() in (".json", ".jsonl")))
            elif path.exists():
                files.append(path)
            else:
                raise CommandError(f"{path}: no such file or folder")
        return files

    def _import_file(self, importer: TurnImporter, path: Path, max_record_bytes: int) -> None:
        total = count_lines(path) if path.suffix.lower() == ".jsonl" else None
        bar = tqdm(
            total=total, desc=path.name, unit="line", file=sys.stderr, disable=not sys.stderr.isatty(), leave=False
        )
        seen = 0
        try:
            for item in read_turn_records(path, max_record_bytes=max_record_bytes):
                bar.update(item.line - bar.n) if total else bar.update(1)
                seen += 1
                if bar.disable and seen % PLAIN_PROGRESS_EVERY == 0:
                    self.stderr.write(f"{path}: {seen} records read")
                if item.error is not None:
                    importer.fail(f"{path}:{item.line}", item.error)
                else:
                    importer.add(item.value, f"{path}:{item.line}")
        except TurnFileError as error:
            importer.fail(str(path), str(error).removeprefix(f"{path}: "))
        finally:
            bar.close()
