"""Django admin for staff: every turn's citations and their targets (issue #3).

Both models are read-only here: the service layer is the one way in
(`chat.services`), and `ai_chat_logs` is the record of what a user was
shown, so the admin neither adds, edits nor deletes rows. The one write is
the "Recompute targets from sources" action (the backfill rule of SPEC
section 12), which goes through `chat.backfill.backfill_rows`. Erasing a user's data
goes through deleting the user, which cascades.

Lists never decode JSON: counts, the kind filter and the search read the
summary columns the service layer writes next to the JSON
(`ChatLog.citation_count`, `target_kinds`, `account_ids`, `sources`), with
lookups that mean the same on SQLite and PostgreSQL. HTML comes from
`chat.admin_display` (format_html only).
"""
from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import ChangeList
from django.db.models import Q, QuerySet, Value
from django.db.models.functions import StrIndex, Substr
from django.db.models.lookups import GreaterThan
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from chat import admin_display
from chat.backfill import backfill_rows
from citations.turn import parse_uuid
from chat.models import ChatLog, ChatSession
from citations.summary import DELIMITER, MALFORMED, UNTYPED, delimited_member
from citations.targets import TARGET_KINDS

#: Columns the log changelist never loads: the JSON and the long texts. The
#: list shows counts from the summary columns and a short head of the question.
LIST_DEFERRED_FIELDS = ("citations", "inline_citations", "response", "user_message", "sources", "account_ids", "target_kinds")
QUESTION_PREVIEW_LENGTH = 80


def _as_uuid(term: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(term)
    except ValueError:
        return None


class _ReadOnlyAdmin(admin.ModelAdmin):
    """View permission only: no add, no field changes, no delete (see module docstring)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TargetKindFilter(admin.SimpleListFilter):
    """Logs with at least one citation (summary or inline) of a target kind,
    or with an untyped or a malformed one.

    Reads `ChatLog.target_kinds` ("|account|untyped|"): a `LIKE '%|kind|%'`
    over a short plain column. JSON containment (`citations__contains`) does
    not exist on SQLite, and a JSON path lookup cannot say "any element".
    The delimiters make the match whole (`account` never matches
    `accounts`); SQLite's LIKE ignoring case does not matter here since every
    member is a fixed lower-case word written by `summarize_citations`.
    """

    title = "target kind"
    parameter_name = "target_kind"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(kind, kind) for kind in (*TARGET_KINDS, UNTYPED, MALFORMED)]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value is None:
            return queryset
        if value not in (*TARGET_KINDS, UNTYPED, MALFORMED):
            return queryset.none()
        return queryset.filter(target_kinds__contains=delimited_member(value))


class ChatLogChangeList(ChangeList):
    """The log list: JSON and long text columns deferred, only a head of the question read."""

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet:
        queryset = super().get_queryset(request, exclude_parameters)
        return queryset.annotate(question_head=Substr("user_message", 1, QUESTION_PREVIEW_LENGTH + 1)).defer(*LIST_DEFERRED_FIELDS)


@admin.register(ChatLog)
class ChatLogAdmin(_ReadOnlyAdmin):
    """Read-only turns: counts, kind/date/prompt filters and search from the summary columns; a detail page with citation tables."""

    list_display = (
        "created_at",
        "question",
        "session_link",
        "user",
        "prompt_version",
        "citations_column",
        "typed_column",
        "untyped_column",
        "malformed_column",
    )
    list_display_links = ("created_at", "question")
    list_select_related = ("session", "user")
    list_per_page = 100
    list_max_show_all = 200
    show_full_result_count = False
    ordering = ("-created_at", "-id")
    # A date filter rather than `date_hierarchy`: the hierarchy runs a MIN/MAX
    # and a DISTINCT over the dates of every matching row on each page view;
    # these links cost no query. Any range works by hand in the URL:
    # ?created_at__gte=2026-11-01&created_at__lt=2026-11-08.
    list_filter = ("prompt_version", TargetKindFilter, ("created_at", admin.DateFieldListFilter))
    # The search itself is `get_search_results`; this only turns the box on.
    search_fields = ("sources",)
    search_help_text = (
        "Each word must match: a source substring (any case), or exactly an account id, "
        "a log or session id, or a username."
    )
    actions = ("recompute_targets",)
    fieldsets = (
        (None, {"fields": ("id", "session_link", "user", "prompt_version", "model", "created_at")}),
        ("Counts (summary column)", {"fields": (("citation_count", "typed_count", "untyped_count", "malformed_count"),)}),
        ("Turn", {"fields": ("user_message", "answer")}),
        ("Citations", {"fields": ("citations_table",)}),
        ("Inline citations", {"fields": ("inline_citations_table",)}),
        ("Raw JSON", {"fields": ("citations_json", "inline_citations_json")}),
        ("Search keys (summary columns)", {"classes": ("collapse",), "fields": ("target_kinds", "account_ids", "sources")}),
    )
    readonly_fields = (
        "session_link",
        "answer",
        "citations_table",
        "inline_citations_table",
        "citations_json",
        "inline_citations_json",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The change view shows the session and the owner: one query, not three.
        return super().get_queryset(request).select_related("session", "user")

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return ChatLogChangeList

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        """Every whitespace-separated word must match one of:

        - a source substring, any case (`sources` holds the distinct sources,
          one a line; `icontains` is LIKE on SQLite, UPPER() LIKE UPPER() on
          PostgreSQL);
        - exactly one of the row's account ids. Not `account_ids__contains`:
          SQLite's LIKE ignores ASCII case and account ids are case-sensitive.
          `StrIndex` is `instr()` on SQLite and `strpos()` on PostgreSQL, both
          exact, and the delimiters ("|id|") make it a whole-member match;
        - exactly the log's id or its session's id (a UUID), or the owner's
          username.
        """
        for word in search_term.split():
            matches = Q(sources__icontains=word) | Q(user__username=word)
            if DELIMITER not in word:
                matches |= GreaterThan(StrIndex("account_ids", Value(delimited_member(word))), 0)
            as_uuid = _as_uuid(word)
            if as_uuid is not None:
                matches |= Q(pk=as_uuid) | Q(session_id=as_uuid)
            queryset = queryset.filter(matches)
        return queryset, False

    # -- list columns ------------------------------------------------------

    def action_checkbox(self, log: ChatLog) -> str:
        # Django labels each checkbox with `str(log)`, which reads
        # `user_message`: a deferred column, so one query per row. Same label,
        # from the question head the list already loaded.
        label = f"{log.created_at:%Y-%m-%d %H:%M} {self._question_head(log)[:60]}"
        checkbox = forms.CheckboxInput(
            {"class": "action-select", "aria-label": format_html("Select this object for an action - {}", label)},
            lambda value: False,
        )
        return checkbox.render(helpers.ACTION_CHECKBOX_NAME, str(log.pk))

    @staticmethod
    def _question_head(log: ChatLog) -> str:
        # `question_head` (changelist only) is one character longer than shown, to know whether to add "…".
        head = getattr(log, "question_head", None)
        return head if head is not None else log.user_message[: QUESTION_PREVIEW_LENGTH + 1]

    @admin.display(description="question", ordering="user_message")
    def question(self, log: ChatLog) -> str:
        head = self._question_head(log)
        return head[:QUESTION_PREVIEW_LENGTH] + ("…" if len(head) > QUESTION_PREVIEW_LENGTH else "")

    # Counts from the summary columns (`summarize_citations`, over `citations`):
    # no JSON is read for the list.
    @admin.display(description="citations", ordering="citation_count")
    def citations_column(self, log: ChatLog) -> int:
        return log.citation_count

    @admin.display(description="typed", ordering="typed_count")
    def typed_column(self, log: ChatLog) -> int:
        return log.typed_count

    @admin.display(description="untyped", ordering="untyped_count")
    def untyped_column(self, log: ChatLog) -> int:
        return log.untyped_count

    @admin.display(description="malformed", ordering="malformed_count")
    def malformed_column(self, log: ChatLog) -> int:
        return log.malformed_count

    @admin.display(description="session", ordering="session__title")
    def session_link(self, log: ChatLog) -> str:
        url = reverse("admin:chat_chatsession_change", args=[log.session_id])
        return format_html('<a href="{}">{}</a>', url, str(log.session))

    # -- detail page (read-only fields) -------------------------------------

    @admin.display(description="answer")
    def answer(self, log: ChatLog) -> str:
        return format_html('<div style="white-space:pre-wrap;max-width:60em">{}</div>', log.response)

    @admin.display(description="citations")
    def citations_table(self, log: ChatLog) -> str:
        return admin_display.citations_table(log.citations)

    @admin.display(description="inline citations")
    def inline_citations_table(self, log: ChatLog) -> str:
        return admin_display.inline_citations_table(log.inline_citations, log.response)

    @admin.display(description="citations (JSON)")
    def citations_json(self, log: ChatLog) -> str:
        return admin_display.pretty_json(log.citations)

    @admin.display(description="inline citations (JSON)")
    def inline_citations_json(self, log: ChatLog) -> str:
        return admin_display.pretty_json(log.inline_citations)

    # -- action ------------------------------------------------------------

    def has_recompute_permission(self, request: HttpRequest) -> bool:
        # The admin never grants "change" (rows are read-only here), so the
        # action asks for the model permission itself: view-only staff may
        # look but not rewrite.
        return request.user.has_perm("chat.change_chatlog")

    def response_action(self, request: HttpRequest, queryset: QuerySet) -> Any:
        # Django filters `pk__in=<posted ids>`, which raises on a forged id that
        # is not a UUID (a 500): keep only the ids that can be ours.
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        valid = [value for value in selected if parse_uuid(value) is not None]
        if len(valid) != len(selected):
            request.POST = request.POST.copy()
            request.POST.setlist(helpers.ACTION_CHECKBOX_NAME, valid)
        return super().response_action(request, queryset)

    @admin.action(description="Recompute targets from sources", permissions=["recompute"])
    def recompute_targets(self, request: HttpRequest, queryset: QuerySet) -> None:
        """SPEC section 12 on the selected rows: citations that already have a
        target are never touched; summary columns are rewritten with the JSON."""
        selected = list(queryset.values_list("pk", flat=True))
        report = backfill_rows(model=ChatLog, ids=selected)
        skipped = (
            f" {len(report.malformed)} log(s) skipped: a JSON column is not a list of objects."
            if report.malformed
            else ""
        )
        if report.typed_total == 0:
            self.message_user(
                request, f"No citation could be typed from its source in the {len(selected)} selected log(s).{skipped}", messages.INFO
            )
            return
        self.message_user(
            request,
            f"Typed {report.typed_total} citation(s) (summary and inline) in {report.rows_changed} "
            f"of {len(selected)} selected log(s).{skipped}",
            messages.SUCCESS,
        )


@admin.register(ChatSession)
class ChatSessionAdmin(_ReadOnlyAdmin):
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
            as_uuid = _as_uuid(word)
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

from chat import admin_live  # noqa: E402,F401  live turns' admin (issue 10)
