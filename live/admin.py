"""Admin for live turns (issues 10 and 18): queued, running, failed and resumed turns, read-only.

A failed turn keeps its checkpoint for inspection; a stored one links to its
`ai_chat_logs` row. Nothing here writes: turns are run by `live`.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from chat.models import ChatLog
from live.models import LiveTurn


class ResumedFilter(admin.SimpleListFilter):
    """Turns a worker took again after the one running them stopped (`resume_count > 0`)."""

    title = "resumed"
    parameter_name = "resumed"

    def lookups(self, request, model_admin):
        return [("yes", "resumed"), ("no", "never resumed")]

    def queryset(self, request, queryset: QuerySet[LiveTurn]) -> QuerySet[LiveTurn]:
        if self.value() == "yes":
            return queryset.filter(resume_count__gt=0)
        if self.value() == "no":
            return queryset.filter(resume_count=0)
        return queryset


@admin.register(LiveTurn)
class LiveTurnAdmin(admin.ModelAdmin):
    """Live turns, newest first; filter by status and resumed."""

    list_display = (
        "id",
        "status",
        "stop_reason",
        "user",
        "created_at",
        "started_at",
        "resume_count",
        "last_seq",
        "error_type",
    )
    list_filter = ("status", "stop_reason", ResumedFilter, "prompt_version")
    list_select_related = ("user",)
    search_fields = ("=id", "=session_id", "=user__username")
    show_full_result_count = False
    exclude = ("checkpoint", "error")
    readonly_fields = ("stored_log", "error_json", "checkpoint_summary")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[LiveTurn]:
        return super().get_queryset(request).defer("checkpoint")

    @admin.display(description="error")
    def error_type(self, turn: LiveTurn) -> str:
        return turn.error.get("type", "") if isinstance(turn.error, dict) else ""

    @admin.display(description="stored as")
    def stored_log(self, turn: LiveTurn) -> str:
        if not ChatLog.objects.filter(pk=turn.pk).exists():
            return "not stored"
        return format_html('<a href="{}">{}</a>', reverse("admin:chat_chatlog_change", args=[turn.pk]), turn.pk)

    @admin.display(description="error event")
    def error_json(self, turn: LiveTurn) -> str:
        return format_html("<pre>{}</pre>", json.dumps(turn.error, indent=2, ensure_ascii=False)) if turn.error else "-"

    @admin.display(description="checkpoint")
    def checkpoint_summary(self, turn: LiveTurn) -> str:
        checkpoint = turn.checkpoint
        if not isinstance(checkpoint, dict):
            return "none (stored turns drop theirs)"
        return format_html(
            "step {}, {} messages, {} recorded events, last event id {}<pre>{}</pre>",
            checkpoint.get("step"),
            len(checkpoint.get("messages") or []),
            len(checkpoint.get("events") or []),
            checkpoint.get("eventSeq"),
            json.dumps(checkpoint, indent=2, ensure_ascii=False)[:200_000],
        )
