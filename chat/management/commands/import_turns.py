"""`python manage.py import_turns PATH... [--user NAME] [--create-users]`"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from tqdm import tqdm

from chat.services import save_turn
from chat.turn_files import TurnFileError, count_lines, read_turn_records
from citations.targets import parse_citation_target
from citations.turn import TurnRecordError, parse_turn_record

PLAIN_PROGRESS_EVERY = 1000


class Command(BaseCommand):
    help = (
        "Import recorded turns (SPEC section 7) from .json files (one record or a list) and .jsonl files "
        "(one record a line). A bad record is reported with file, line and JSON path; the others are still "
        "imported. Exit status 1 when any record failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, help="files, or folders whose .json/.jsonl files are read in name order")
        parser.add_argument("--user", help="owner of every imported turn, instead of each record's 'user'")
        parser.add_argument("--create-users", action="store_true", help="create users that do not exist yet")

    def handle(self, *args, paths: list[Path], user: str | None, create_users: bool, **options) -> None:
        self.create_users = create_users
        self.users: dict[str, object] = {}
        self.counts: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.skipped_types: Counter[str] = Counter()
        files = self._expand(paths)
        try:
            override = self._user(user, "--user") if user is not None else None
        except TurnRecordError as error:
            raise CommandError(str(error), returncode=1) from None

        for path in files:
            self._import_file(path, override)

        self.stdout.write(self._summary())
        if self.counts["failed"]:
            raise CommandError(f"{self.counts['failed']} record(s) failed", returncode=1)

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

    def _user(self, username: str, where: str):
        if username in self.users:
            return self.users[username]
        user_model = get_user_model()
        if not username:
            raise TurnRecordError(where, "expected a username, got an empty string")
        found = user_model.objects.filter(**{user_model.USERNAME_FIELD: username}).first()
        if found is None:
            if not self.create_users:
                raise TurnRecordError(where, f"no user named {username!r} (pass --create-users to create it)")
            field = user_model._meta.get_field(user_model.USERNAME_FIELD)
            try:
                field.clean(username, None)  # max length and the username validator
            except ValidationError as error:
                raise TurnRecordError(where, f"cannot create user {username!r}: {' '.join(error.messages)}") from None
            # Not cached: the creation may still be rolled back with its record.
            return user_model.objects.create_user(**{user_model.USERNAME_FIELD: username})
        self.users[username] = found
        return found

    def _import_file(self, path: Path, override) -> None:
        total = count_lines(path) if path.suffix.lower() == ".jsonl" else None
        bar = tqdm(total=total, desc=path.name, unit="line", file=sys.stderr, disable=not sys.stderr.isatty(), leave=False)
        seen = 0
        try:
            for item in read_turn_records(path):
                bar.update(item.line - bar.n) if total else bar.update(1)
                seen += 1
                if bar.disable and seen % PLAIN_PROGRESS_EVERY == 0:
                    self.stderr.write(f"{path}: {seen} records read")
                if item.error is not None:
                    self._fail(f"{path}:{item.line}: {item.error}")
                    continue
                try:
                    self._import_record(item.value, override)
                except TurnRecordError as error:
                    self._fail(f"{path}:{item.line}: {error}")
                except DatabaseError as error:
                    # Validation should leave nothing for the database to
                    # refuse; if it does, the record's transaction is rolled
                    # back and the import goes on.
                    self._fail(f"{path}:{item.line}: the database refused the record: {error}".rstrip())
        except TurnFileError as error:
            self._fail(str(error))
        finally:
            bar.close()

    def _import_record(self, value, override) -> None:
        # Check the record before creating any user for it: nothing half-saved.
        turn = parse_turn_record(value, user_given=override is not None)
        with transaction.atomic():
            owner = override if override is not None else self._user(turn.user, "user")
            saved = save_turn(value, user=owner)
        if not saved.created:
            self.counts["skipped"] += 1
            return
        self.counts["imported"] += 1
        self.skipped_types.update(saved.skipped_citations)
        for citation in saved.log.citations:
            target = parse_citation_target(citation.get("target"))
            self.kinds[target.kind if target is not None else "untyped"] += 1

    def _fail(self, message: str) -> None:
        self.counts["failed"] += 1
        self.stderr.write(message)

    def _summary(self) -> str:
        typed = {kind: n for kind, n in sorted(self.kinds.items()) if kind != "untyped"}
        by_kind = ", ".join(f"{kind} {n}" for kind, n in typed.items()) or "none"
        return (
            f"imported {self.counts['imported']}, skipped {self.counts['skipped']}, failed {self.counts['failed']}; "
            f"citations typed {sum(typed.values())} ({by_kind}), untyped {self.kinds['untyped']}"
            + self._skipped_summary()
        )

    def _skipped_summary(self) -> str:
        # SPEC 6: citation types that are not recorded are reported, never silently dropped.
        if not self.skipped_types:
            return ""
        by_type = ", ".join(f"{kind} {n}" for kind, n in sorted(self.skipped_types.items()))
        return f"; citations not recorded {sum(self.skipped_types.values())} ({by_type})"
