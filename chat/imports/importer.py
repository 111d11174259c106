"""Importing many turn records: `TurnImporter`, a batch per transaction (docs/turns.md, `import_turns`).

Each record goes through the same checks and assembler as `chat.services.save_turn`
(`check_limits`, `parse_turn_record`, `prepare_row`); a batch is written by
`chat.imports.writer.write_turns`.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import DatabaseError, models, transaction

from chat.imports.envelope import is_export, parse_export, write_export
from chat.imports.writer import WriteOutcome, write_turns
from chat.models import ChatLog, ChatSession
from chat.services import PreparedTurn, TurnLimits, check_limits, prepare_row, support_statuses
from citations.turn import TurnRecord, TurnRecordError, parse_turn_record

__all__ = ["TurnImporter", "import_user"]

logger = logging.getLogger(__name__)


def import_user(username: str, *, create: bool, where: str) -> AbstractBaseUser:
    """The user named `username`, created first when `create` (safe against concurrent creators).

    Raises `TurnRecordError` at `where` (`user`, `--user`) for an empty or
    invalid name, or an unknown one without `create`.
    """
    user_model = get_user_model()
    if not username:
        raise TurnRecordError(where, "expected a username, got an empty string")
    found = user_model.objects.filter(**{user_model.USERNAME_FIELD: username}).first()
    if found is not None:
        return found
    if not create:
        raise TurnRecordError(where, f"no user named {username!r} (pass --create-users to create it)")
    field = cast(models.Field, user_model._meta.get_field(user_model.USERNAME_FIELD))
    try:
        field.clean(username, None)  # max length and the username validator
    except ValidationError as error:
        raise TurnRecordError(where, f"cannot create user {username!r}: {' '.join(error.messages)}") from None
    # get_or_create re-reads on a unique violation: a parallel import that
    # created the same name first is no refusal.
    # The field's name is only known at run time; the stubs check keywords by name.
    user, _ = user_model.objects.get_or_create(**{user_model.USERNAME_FIELD: username})  # type: ignore[arg-type]
    return user


def _metrics() -> Any:
    # Imported with the first record counted, not with this module (docs/metrics.md).
    from telemetry import metrics

    return metrics


@dataclass(frozen=True, slots=True)
class _Pending:
    where: str
    prepared: PreparedTurn


class TurnImporter:
    """Imports turn records in batches, each batch one transaction (docs/turns.md, `import_turns`).

    `add(record, where)` validates a record once, assembles it and queues
    it; every `batch_size` records the queue is written by `write_turns`.
    A bad record is refused alone: reported through `report(where: message)`
    and counted, the others of its batch still written. A batch the database
    refuses is rolled back and written again one record per transaction, so
    the record at fault is found. `finish()` writes the last batch.
    Killed at any moment, committed batches stay and nothing is half-written;
    a rerun skips what is stored.
    """

    def __init__(
        self,
        *,
        report: Callable[[str], None],
        user: AbstractBaseUser | None = None,
        create_users: bool = False,
        batch_size: int = 500,
        limits: TurnLimits | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        self.report = report
        self.user = user
        self.create_users = create_users
        self.batch_size = batch_size
        self.limits = limits or TurnLimits.from_settings()
        self.counts: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.skipped_types: Counter[str] = Counter()
        self._users: dict[str, AbstractBaseUser] = {}
        self._pending: list[_Pending] = []

    def fail(self, where: str, message: str) -> None:
        """Count and report a record that could not be read."""
        self.counts["failed"] += 1
        _metrics().turns_imported(outcome="failed")
        self.report(f"{where}: {message}")

    def add(self, record: Any, where: str) -> None:
        """Validate, assemble and queue one decoded record; `where` is `file:line`. An export envelope
        (`chat.imports.envelope`) is stored at once, its rows untouched."""
        if is_export(record):
            self._add_export(record, where)
            return
        try:
            check_limits(record, self.limits)
            turn = parse_turn_record(record, user_given=self.user is not None)
            owner = self.user if self.user is not None else self._owner(turn)
            prepared = prepare_row(turn, owner.pk, self.limits)
        except TurnRecordError as error:
            self.fail(where, str(error))
            return
        self._pending.append(_Pending(where, prepared))
        if len(self._pending) >= self.batch_size:
            self.flush()

    def _add_export(self, record: dict[str, Any], where: str) -> None:
        """An exported session: checked whole, then written in one transaction (its rows as exported)."""
        self.flush()  # records before it first, in file order
        try:
            export = parse_export(record)
            if self.user is not None:
                owner = self.user
            elif export.user is None:
                raise TurnRecordError("user", "the export names no user: pass --user")
            else:
                owner = import_user(export.user, create=self.create_users, where="user")
            created, skipped = write_export(export, owner=owner)
        except TurnRecordError as error:
            self.fail(where, str(error))
            return
        except DatabaseError as error:
            self.fail(where, f"the database refused the export: {error}".rstrip())
            return
        self.counts["imported"] += len(created)
        self.counts["skipped"] += skipped
        for message in created:
            for citation in message["citations"]:
                target = citation.get("target") if isinstance(citation, dict) else None
                kind = target.get("kind") if isinstance(target, dict) else None
                self.kinds[kind if isinstance(kind, str) else "untyped"] += 1

    def _owner(self, turn: TurnRecord) -> AbstractBaseUser:
        username = turn.user or ""
        if username in self._users:
            return self._users[username]
        user_model = get_user_model()
        if self.create_users and not user_model.objects.filter(**{user_model.USERNAME_FIELD: username}).exists():
            # A user created for this record owns nothing yet: a record that
            # names a stored session or turn would be refused, so refuse it
            # before the user is created (after writing what is queued,
            # which may store that session; new users are rare).
            # A parallel import may create the same user meanwhile: what it
            # stored under that name is no refusal.
            self.flush()
            other_owner = {f"user__{user_model.USERNAME_FIELD}": username}
            if ChatSession.objects.filter(pk=turn.session_id).exclude(**other_owner).exists():
                raise TurnRecordError("session.id", f"session {turn.session_id} belongs to another user")
            if turn.id is not None and ChatLog.objects.filter(pk=turn.id).exclude(**other_owner).exists():
                raise TurnRecordError("id", f"turn {turn.id} belongs to another user")
        user = import_user(username, create=self.create_users, where="user")
        self._users[username] = user
        return user

    def flush(self) -> None:
        """Write the queued records (one transaction; one per record if the database refuses the batch)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        try:
            with transaction.atomic():
                outcomes = write_turns([p.prepared.row for p in pending])
        except DatabaseError:
            logger.warning("a batch of %d turns was refused by the database: writing them one by one", len(pending))
            for item in pending:
                try:
                    with transaction.atomic():
                        [outcome] = write_turns([item.prepared.row])
                except DatabaseError as error:
                    self.fail(item.where, f"the database refused the record: {error}".rstrip())
                    continue
                self._count(item, outcome)
            return
        for item, outcome in zip(pending, outcomes, strict=True):
            self._count(item, outcome)

    def _count(self, item: _Pending, outcome: WriteOutcome) -> None:
        if isinstance(outcome, tuple):
            self.fail(item.where, f"{outcome[1]}: {outcome[2]}")
        elif outcome == "skipped":
            self.counts["skipped"] += 1
            _metrics().turns_imported(outcome="skipped")
        else:
            self.counts["imported"] += 1
            _metrics().turns_imported(outcome="imported")
            _metrics().citation_support(
                path="import", statuses=support_statuses(item.prepared.row.columns["inline_citations"])
            )
            self.skipped_types.update(item.prepared.skipped_citations)
            # Freshly assembled: a target, when present, is one the registry
            # wrote (valid by construction), so its kind needs no parsing.
            for citation in item.prepared.citations:
                target = citation.get("target")
                self.kinds[target["kind"] if target is not None else "untyped"] += 1

    def finish(self) -> None:
        """Write what is still queued."""
        self.flush()

    def summary(self) -> str:
        """`imported N, skipped N, failed N; citations typed N (kind N, ...), untyped N`.

        Citations of types that are not recorded (docs/turns.md) add
        `; citations not recorded N (type N, ...)`.
        """
        typed = {kind: n for kind, n in sorted(self.kinds.items()) if kind != "untyped"}
        by_kind = ", ".join(f"{kind} {n}" for kind, n in typed.items()) or "none"
        return (
            f"imported {self.counts['imported']}, skipped {self.counts['skipped']}, failed {self.counts['failed']}; "
            f"citations typed {sum(typed.values())} ({by_kind}), untyped {self.kinds['untyped']}"
            + self._skipped_summary()
        )

    def _skipped_summary(self) -> str:
        if not self.skipped_types:
            return ""
        by_type = ", ".join(f"{kind} {n}" for kind, n in sorted(self.skipped_types.items()))
        return f"; citations not recorded {sum(self.skipped_types.values())} ({by_type})"
