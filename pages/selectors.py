"""Reads for the pages, always scoped to the caller (docs/privacy.md and docs/pages.md)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from chat.models import ChatLog
from chat.selectors import session_get_for_user, session_messages
from citations.uuids import parse_uuid
from finance.selectors import account_target_id, accounts_for_user


def account_names_for_user(*, user: AbstractBaseUser) -> dict[str, str]:
    """The caller's account ids, as a target carries them, mapped to each account's readable name.

    Accounts that no target can name (a crypto wallet) are left out. One query.
    """
    names = {}
    for account in accounts_for_user(user=user):
        target_id = account_target_id(account)
        if target_id is not None:
            names[target_id] = account.label
    return names


def turn_get_for_user(*, session_id: str, log_id: str, user: AbstractBaseUser) -> ChatLog | None:
    """The turn `log_id` of the caller's session `session_id`, or None (missing, another user's, malformed ids).

    At most two queries (the session, then the turn).
    """
    session = session_get_for_user(session_id=session_id, user=user)
    log_uuid = parse_uuid(log_id)
    if session is None or log_uuid is None:
        return None
    log = session_messages(session=session).filter(pk=log_uuid).first()
    if log is not None:
        log.session = session  # the view names the session's title; no query for it
    return log
