"""Pagination of the sessions list: `message_count` computed for the page's rows only (docs/api.md)."""

from __future__ import annotations

from typing import Any, cast

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from rest_framework.pagination import PageNumberPagination

from chat.models import ChatSession
from chat.selectors import sessions_with_message_counts


class SessionPaginator(Paginator):
    """Django's `Paginator` whose page is `sessions_with_message_counts` of the slice.

    The count stays `queryset.count()` on `chat_sessions` alone.
    """

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        page = cast("QuerySet[ChatSession]", self.object_list[bottom:top])
        return Page(sessions_with_message_counts(page=page), number, self)


class SessionPagination(PageNumberPagination):
    """DRF's page-number pagination (`?page=N`, 50 a page) over `SessionPaginator`."""

    django_paginator_class = SessionPaginator
