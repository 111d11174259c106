"""The sessions' admin: read-only, each linked to its logs."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from chat.admin.readonly import ReadOnlyAdmin
from chat.models import ChatSession
from citations.uuids import parse_uuid


@admin.register(ChatSession)
class ChatSessionAdmin(ReadOnlyAdmin):
    """Read-only sessions, linked to their logs."""

    list_display = ("title_or_id", "user", "created_at", "updated_at")
    list_select_related = ("user",)
    list_per_page = 100
    show_full_result_count = False
    ordering = ("-updated_at", "-id")
    list_filter = (("updated_at", admin.DateFieldListFilter),)
    search_fields = ("title",)
    search_help_text = "Each word must match: a title substring (any case), or exactly a session id or a username."
    fields = ("id", "title", "user", "created_at", "updated_at", "logs_link")
    readonly_fields = ("logs_link",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("user")

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        for word in search_term.split():
            matches = Q(title__icontains=word) | Q(user__username=word)
            as_uuid = parse_uuid(word)
            if as_uuid is not None:
                matches |= Q(pk=as_uuid)
            queryset = queryset.filter(matches)
        return queryset, False

    @admin.display(description="session", ordering="title")
    def title_or_id(self, session: ChatSession) -> str:
        return str(session)

    @admin.display(description="turns")
    def logs_link(self, session: ChatSession) -> str:
        url = reverse("admin:chat_chatlog_changelist")
        return format_html('<a href="{}?session__exact={}">{} turn(s) →</a>', url, session.pk, session.logs.count())
