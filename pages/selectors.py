"""Reads for the pages, always scoped to the caller (docs/privacy.md and docs/pages.md)."""

from __future__ import annotations

from typing import cast

from django.contrib.auth.models import AbstractBaseUser
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet

from chat.models import ChatLog, ChatSession
from chat.selectors import session_get_for_user, session_list_for_user, session_messages, sessions_with_message_counts
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


def session_page_for_user(*, user: AbstractBaseUser, number: str | None, per_page: int) -> Page:
    """Page `number` of the caller's sessions, most recently active first, each with `message_count`.

    `number` is read as `Paginator.get_page` reads it (missing or bad: the
    first page; past the end: the last). Two queries: the count, then the
    page with its turns counted for its own rows only.
    """
    page = Paginator(session_list_for_user(user=user), per_page).get_page(number)
    page.object_list = sessions_with_message_counts(page=cast(QuerySet[ChatSession], page.object_list))
    return page


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
