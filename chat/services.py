"""The one way in: saving turns (docs/turns.md).

`save_turn`/`record_turn` validate a whole turn record, feed it to the turn
assembler (`citations.assembler`; a live turn passes the assembler's result
it streamed instead) and write the session and the `ai_chat_logs` row in one
transaction. `chat.imports.importer.TurnImporter` does the same for many
records, a batch per transaction (`chat.imports.writer`), with `check_limits`
and `prepare_row` from here. Nothing of a refused record is saved.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from chat.imports.writer import SessionWrite, TurnRow, WriteOutcome, write_turns
from chat.models import ChatLog
from citations.assembler import AssembledTurn, assemble_record
from citations.turn import TurnRecord, TurnRecordError, parse_turn_record

__all__ = [
    "PreparedTurn",
    "SavedTurn",
    "TurnLimits",
    "TurnRecordError",
    "check_limits",
    "prepare_row",
    "record_turn",
    "save_assembled_turn",
    "save_turn",
    "support_statuses",
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


def check_limits(record: Any, limits: TurnLimits) -> None:
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
class PreparedTurn:
    row: TurnRow
    citations: list[dict[str, Any]]
    skipped_citations: dict[str, int]


def prepare_row(
    turn: TurnRecord, owner_id: int, limits: TurnLimits, assembled: AssembledTurn | None = None
) -> PreparedTurn:
    """Assemble a validated turn into the row to write for the user `owner_id` (SPEC 6 and 7, docs/turns.md);
    `assembled` when a live turn streamed it. Raises `TurnRecordError` for an answer over the limits."""
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
        "user_id": owner_id,
        "user_message": turn.user_message,
        "response": assembled.response,
        "citations": assembled.citations,
        "inline_citations": assembled.inline_citations,
        "prompt_version": turn.prompt_version,
        "model": assembled.model,
        "created_at": created_at,
    }
    session = SessionWrite(id=turn.session_id, user_id=owner_id, title=turn.session_title, created_at=created_at)
    return PreparedTurn(TurnRow(columns, session), assembled.citations, dict(assembled.skipped_citations))


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
    check_limits(record, limits)
    turn = parse_turn_record(record, user_given=user is not None)
    if user is None:
        assert turn.user is not None  # parse_turn_record requires `user` when none is given
        owner = _resolve_user(turn.user)
    else:
        owner = user
    return _save(prepare_row(turn, owner.pk, limits, assembled), path="record")


def save_assembled_turn(
    *,
    turn_id: uuid.UUID,
    session_id: uuid.UUID,
    session_title: str | None,
    user_id: int,
    prompt_version: str,
    created_at: dt.datetime,
    user_message: str,
    assembled: AssembledTurn,
) -> SavedTurn:
    """Save a live turn of the user `user_id`: what its `citations.assembler.TurnAssembler` streamed, as it
    streamed it (SPEC 6 and 11, docs/turns.md).

    The same row and the same checks as `save_turn` for the record the turn
    made, without writing that record out and reading it back. Raises
    `TurnRecordError` for a message or an answer over `TURN_MAX_TEXT_CHARS`,
    or a session or turn id owned by another user; nothing is written then.
    Called in a transaction (the runner's, with the turn's last events), it
    takes no savepoint of its own: a refusal rolls that transaction back
    whole, so its caller lets the error leave its atomic block.
    """
    limits = TurnLimits.from_settings()
    if len(user_message) > limits.max_text_chars:
        raise TurnRecordError(
            "user_message",
            f"{len(user_message)} characters, over the limit of {limits.max_text_chars} (TURN_MAX_TEXT_CHARS)",
        )
    turn = TurnRecord(
        id=turn_id,
        session_id=session_id,
        session_title=session_title,
        user=None,
        prompt_version=prompt_version,
        created_at=created_at,
        user_message=user_message,
        events=(),
    )
    return _save(prepare_row(turn, user_id, limits, assembled), path="live", savepoint=False)


def support_statuses(inline_citations: list[dict[str, Any]]) -> Counter[str]:
    """A freshly assembled turn's inline citations by support status (docs/support.md); `none` for a citation
    whose support could not be computed."""
    return Counter(citation["support"]["status"] if "support" in citation else "none" for citation in inline_citations)


def _metrics() -> Any:
    # Imported with the first turn saved, not with this module (docs/metrics.md).
    from telemetry import metrics

    return metrics


def _save(prepared: PreparedTurn, *, path: str, savepoint: bool = True) -> SavedTurn:
    """Write one prepared row and its session (one transaction); the stored row when its id was already.

    `path` (`live`, `record`) labels the support figures of a created turn (docs/metrics.md). `savepoint`
    False: inside a caller's transaction, none of its own (two statements fewer; a refusal then spoils the
    caller's transaction, which must end in a rollback)."""
    with transaction.atomic(savepoint=savepoint):
        [outcome] = write_turns([prepared.row])
        _raise_refusal(outcome)
    columns = prepared.row.columns
    if outcome == "skipped":
        logger.debug("turn %s already stored: skipped", columns["id"])
        return SavedTurn(ChatLog.objects.get(pk=columns["id"]), created=False)
    statuses = support_statuses(columns["inline_citations"])
    # Counted once the turn is committed (a live turn's save commits with its last events, or not at all).
    transaction.on_commit(lambda: _metrics().citation_support(path=path, statuses=statuses))
    log = ChatLog.from_db(transaction.get_connection().alias, list(columns), list(columns.values()))
    logger.debug("recorded turn %s in session %s (%d citations)", log.id, log.session_id, len(log.inline_citations))
    return SavedTurn(log, created=True, skipped_citations=prepared.skipped_citations)


def record_turn(record: Any, user: AbstractBaseUser | None = None) -> ChatLog:
    """Save one turn record and return its `ai_chat_logs` row (docs/turns.md).

    Same contract as `save_turn`; a record whose `id` is already stored
    returns the stored row unchanged.
    """
    return save_turn(record, user=user).log
