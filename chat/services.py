"""The one way in: saving turns (docs/turns.md).

`save_turn`/`record_turn` validate a whole turn record, feed it to the turn
assembler (`citations.assembler`; a live turn passes the assembler's result
it streamed instead) and write the session and the `ai_chat_logs` row in one
transaction. `TurnImporter` does the same for many
records, a batch per transaction (`chat.turn_writer`). Nothing of a refused
record is saved.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import DatabaseError, models, transaction
from django.utils import timezone

from chat.models import ChatLog, ChatSession
from chat.turn_writer import SessionWrite, TurnRow, WriteOutcome, write_turns
from citations.assembler import AssembledTurn, assemble_record
from citations.turn import TurnRecord, TurnRecordError, parse_turn_record

__all__ = [
    "SavedTurn",
    "TurnImporter",
    "TurnLimits",
    "TurnRecordError",
    "import_user",
    "record_turn",
    "save_turn",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SavedTurn:
    """The row for a turn record and whether this call created it.

    `created` is False when a row with the record's `id` was already stored:
    the record was skipped, never duplicated.
    """

    log: ChatLog
    created: bool
    #: Citations of types that are not recorded, by type (docs/turns.md): reported, never silently dropped.
    skipped_citations: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TurnLimits:
    """Sizes a turn record may not exceed (docs/running.md "Importing turns"); settings give the defaults.

    `max_text_chars`: characters (code points) of `user_message` and of the
    assembled answer. `max_tool_rows`: rows of one `execute_sql` output.
    """

    max_text_chars: int
    max_tool_rows: int

    @classmethod
    def from_settings(cls) -> TurnLimits:
        return cls(max_text_chars=settings.TURN_MAX_TEXT_CHARS, max_tool_rows=settings.TURN_MAX_TOOL_ROWS)


def _check_limits(record: Any, limits: TurnLimits) -> None:
    """Refuse an oversized record before validating it (its shape is checked later, by `parse_turn_record`)."""
    if not isinstance(record, dict):
        return
    message = record.get("user_message")
    if isinstance(message, str) and len(message) > limits.max_text_chars:
        raise TurnRecordError(
            "user_message",
            f"{len(message)} characters, over the limit of {limits.max_text_chars} (TURN_MAX_TEXT_CHARS)",
        )
    events = record.get("events")
    for i, event in enumerate(events if isinstance(events, list) else ()):
        output = event.get("output") if isinstance(event, dict) else None
        rows = output.get("rows") if isinstance(output, dict) else None
        if isinstance(rows, list) and len(rows) > limits.max_tool_rows:
            raise TurnRecordError(
                f"events[{i}].output.rows",
                f"{len(rows)} rows, over the limit of {limits.max_tool_rows} (TURN_MAX_TOOL_ROWS)",
            )


@dataclass(frozen=True, slots=True)
class _Prepared:
    row: TurnRow
    citations: list[dict[str, Any]]
    skipped_citations: dict[str, int]


def _prepare(
    turn: TurnRecord, owner: AbstractBaseUser, limits: TurnLimits, assembled: AssembledTurn | None = None
) -> _Prepared:
    """Assemble a validated turn into the row to write (docs/turns.md); `assembled` when a live turn streamed it."""
    if assembled is None:
        assembled = assemble_record(turn.events)
    if len(assembled.response) > limits.max_text_chars:
        raise TurnRecordError(
            "events",
            f"the answer has {len(assembled.response)} characters, "
            f"over the limit of {limits.max_text_chars} (TURN_MAX_TEXT_CHARS)",
        )
    created_at = turn.created_at or timezone.now()
    columns = {
        "id": turn.id or uuid.uuid4(),
        "session_id": turn.session_id,
        "user_id": owner.pk,
        "user_message": turn.user_message,
        "response": assembled.response,
        "citations": assembled.citations,
        "inline_citations": assembled.inline_citations,
        "prompt_version": turn.prompt_version,
        "model": assembled.model,
        "created_at": created_at,
    }
    session = SessionWrite(id=turn.session_id, user_id=owner.pk, title=turn.session_title, created_at=created_at)
    return _Prepared(TurnRow(columns, session), assembled.citations, dict(assembled.skipped_citations))


def _resolve_user(username: str) -> AbstractBaseUser:
    user_model = get_user_model()
    try:
        return user_model.objects.get(**{user_model.USERNAME_FIELD: username})
    except user_model.DoesNotExist:
        raise TurnRecordError("user", f"no user named {username!r}") from None


def _raise_refusal(outcome: WriteOutcome) -> None:
    if isinstance(outcome, tuple):
        raise TurnRecordError(outcome[1], outcome[2])


def save_turn(
    record: Any,
    *,
    user: AbstractBaseUser | None = None,
    assembled: AssembledTurn | None = None,
) -> SavedTurn:
    """Validate and save one turn record (docs/turns.md).

    `record` is decoded JSON. `user` owns the turn; when None, the record's
    `user` names an existing user. A record whose `id` is already stored by
    the same user is skipped (`created=False`, the stored row returned).
    `assembled` is what a live turn streamed (`citations.assembler.TurnAssembler`):
    it is stored as is, so the row equals the stream; an import leaves it
    None and the record's events are assembled here, by the same assembler.

    Raises `TurnRecordError` (with the JSON path) for a malformed or
    oversized record (`TurnLimits.from_settings()`), an unknown user, a
    session or turn id owned by another user. Either the session and the
    row are both written, or nothing is.
    """
    limits = TurnLimits.from_settings()
    _check_limits(record, limits)
    turn = parse_turn_record(record, user_given=user is not None)
    if user is None:
        assert turn.user is not None  # parse_turn_record requires `user` when none is given
        owner = _resolve_user(turn.user)
    else:
        owner = user
    prepared = _prepare(turn, owner, limits, assembled)
    with transaction.atomic():
        [outcome] = write_turns([prepared.row])
        _raise_refusal(outcome)
    if outcome == "skipped":
        logger.debug("turn %s already stored: skipped", prepared.row.columns["id"])
        return SavedTurn(ChatLog.objects.get(pk=prepared.row.columns["id"]), created=False)
    log = ChatLog(**prepared.row.columns)
    log._state.adding = False
    log._state.db = transaction.get_connection().alias
    logger.debug("recorded turn %s in session %s (%d citations)", log.id, turn.session_id, len(log.inline_citations))
    return SavedTurn(log, created=True, skipped_citations=prepared.skipped_citations)


def record_turn(record: Any, user: AbstractBaseUser | None = None) -> ChatLog:
    """Save one turn record and return its `ai_chat_logs` row (docs/turns.md).

    Same contract as `save_turn`; a record whose `id` is already stored
    returns the stored row unchanged.
    """
    return save_turn(record, user=user).log


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
    from chat import metrics

    return metrics


@dataclass(frozen=True, slots=True)
class _Pending:
    where: str
    prepared: _Prepared


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
        """Validate, assemble and queue one decoded record; `where` is `file:line`."""
        try:
            _check_limits(record, self.limits)
            turn = parse_turn_record(record, user_given=self.user is not None)
            owner = self.user if self.user is not None else self._owner(turn)
            prepared = _prepare(turn, owner, self.limits)
        except TurnRecordError as error:
            self.fail(where, str(error))
            return
        self._pending.append(_Pending(where, prepared))
        if len(self._pending) >= self.batch_size:
            self.flush()

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
