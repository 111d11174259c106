"""The one way in: saving turns (SPEC section 7).

`record_turn` validates a whole turn record, replays it through the pure
domain (`citations.turn.assemble_turn`) and writes the session and the
`ai_chat_logs` row in one transaction. Nothing of a refused record is saved.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from chat.models import ChatLog, ChatSession
from citations.registry import TurnRegistry
from citations.summary import summarize_citations
from citations.turn import TurnRecordError, assemble_turn, parse_turn_record

__all__ = ["SavedTurn", "TurnRecordError", "citation_summary_fields", "record_turn", "save_turn"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SavedTurn:
    """The row for a turn record and whether this call created it.

    `created` is False when a row with the record's `id` was already stored:
    the record was skipped, never duplicated.
    """

    log: ChatLog
    created: bool
    #: Citations not recorded, by type (SPEC section 6); empty when skipped as already stored.
    skipped_citations: dict[str, int] = field(default_factory=dict)


def _resolve_user(username: str) -> AbstractBaseUser:
    user_model = get_user_model()
    try:
        return user_model.objects.get(**{user_model.USERNAME_FIELD: username})
    except user_model.DoesNotExist:
        raise TurnRecordError("user", f"no user named {username!r}") from None


def save_turn(
    record: Any,
    *,
    user: AbstractBaseUser | None = None,
    registry_restores: Mapping[int, TurnRegistry] | None = None,
) -> SavedTurn:
    """Validate and save one turn record (SPEC sections 6 and 7).

    `record` is decoded JSON. `user` owns the turn; when None, the record's
    `user` names an existing user. A record whose `id` is already stored by
    the same user is skipped (`created=False`). `registry_restores` is for a
    live turn resumed from checkpoints (`citations.turn.assemble_turn`).

    Raises `TurnRecordError` (with the JSON path) for a malformed record, an
    unknown user, a session or turn id owned by another user. Either the
    session and the row are both written, or nothing is.
    """
    turn = parse_turn_record(record, user_given=user is not None)
    owner = user if user is not None else _resolve_user(turn.user)  # type: ignore[arg-type]

    if turn.id is not None:
        existing = _existing_log(turn.id, owner)
        if existing is not None:
            logger.debug("turn %s already stored: skipped", turn.id)
            return SavedTurn(existing, created=False)

    assembled = assemble_turn(turn.events, registry_restores=registry_restores)
    created_at = turn.created_at or timezone.now()
    try:
        with transaction.atomic():
            session = _session_for_turn(turn.session_id, turn.session_title, owner, created_at)
            log = ChatLog.objects.create(
                **({"id": turn.id} if turn.id is not None else {}),
                session=session,
                user=owner,
                user_message=turn.user_message,
                response=assembled.response,
                citations=assembled.citations,
                inline_citations=assembled.inline_citations,
                prompt_version=turn.prompt_version,
                model=assembled.model,
                created_at=created_at,
                **citation_summary_fields(assembled.citations, assembled.inline_citations),
            )
    except IntegrityError:
        # Another writer stored the same turn id between our check and insert.
        existing = _existing_log(turn.id, owner) if turn.id is not None else None
        if existing is None:
            raise
        return SavedTurn(existing, created=False)

    logger.debug("recorded turn %s in session %s (%d citations)", log.id, session.id, len(assembled.inline_citations))
    return SavedTurn(log, created=True, skipped_citations=assembled.skipped_citations)


def citation_summary_fields(citations: Any, inline_citations: Any) -> dict[str, Any]:
    """The `ChatLog` summary columns for these JSON values, as model field names.

    Every writer of `citations`/`inline_citations` (the service, the backfill)
    writes these with them so the admin's filters never go stale.
    """
    summary = summarize_citations(citations, inline_citations)
    # Field by field: `dataclasses.asdict` deep-copies, a cost the backfill pays per row.
    return {field.name: getattr(summary, field.name) for field in fields(summary)}


def record_turn(record: Any, user: AbstractBaseUser | None = None) -> ChatLog:
    """Save one turn record and return its `ai_chat_logs` row (SPEC section 7).

    Same contract as `save_turn`; a record whose `id` is already stored
    returns the stored row unchanged.
    """
    return save_turn(record, user=user).log


def _existing_log(log_id: Any, owner: AbstractBaseUser) -> ChatLog | None:
    existing = ChatLog.objects.filter(pk=log_id).only("id", "user_id").first()
    if existing is None:
        return None
    if existing.user_id != owner.pk:
        raise TurnRecordError("id", f"turn {log_id} belongs to another user")
    return ChatLog.objects.get(pk=log_id)


def _session_for_turn(session_id: Any, title: str | None, owner: AbstractBaseUser, created_at: Any) -> ChatSession:
    """Get (locked) or create the turn's session and widen its time span."""
    session, created = ChatSession.objects.select_for_update().get_or_create(
        pk=session_id,
        defaults={"user": owner, "title": title or "", "created_at": created_at, "updated_at": created_at},
    )
    if created:
        return session
    if session.user_id != owner.pk:
        raise TurnRecordError("session.id", f"session {session_id} belongs to another user")
    changed = []
    if title and not session.title:
        session.title = title
        changed.append("title")
    if created_at > session.updated_at:
        session.updated_at = created_at
        changed.append("updated_at")
    if created_at < session.created_at:
        session.created_at = created_at
        changed.append("created_at")
    if changed:
        session.save(update_fields=changed)
    return session
