"""Pagination of the sessions list: `message_count` computed for the page's rows only (docs/api.md)."""

from __future__ import annotations

from typing import Any, cast

from django.core.paginator import Page, Paginator
from rest_framework.pagination import PageNumberPagination

from chat.api.rendering import LIST_COLUMNS
from chat.selectors import SessionListPages


class SessionPaginator(Paginator):
    """Django's `Paginator` over `SessionListPages`: pages of `LIST_COLUMNS` tuples.

    The count is `chat_sessions` alone; a page past the caller's last
    session (an empty list) runs no second query.
    """

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        if bottom >= top:
            return Page([], number, self)
        pages = cast(SessionListPages, self.object_list)
        return Page(pages.page(bottom, top, [name for name, _ in LIST_COLUMNS]), number, self)


class SessionPagination(PageNumberPagination):
    """DRF's page-number pagination (`?page=N`, 50 a page) over `SessionPaginator`."""

    django_paginator_class = SessionPaginator
