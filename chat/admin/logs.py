"""The chat logs' admin for staff: every turn's citations and their targets (issue #3).

Both models are read-only here: the service layer is the one way in
(`chat.services`), and `ai_chat_logs` is the record of what a user was
shown, so the admin neither adds, edits nor deletes rows. The one write is
the "Recompute targets from sources" action (the backfill rule of
docs/backfill.md), which goes through `chat.backfill.backfill_rows`. Erasing a user's data
goes through deleting the user, which cascades.

Counts, the kind filter and the search are computed by the database from
the stored JSON itself (`chat.citation_queries`: jsonb/jsonpath with GIN
indexes on PostgreSQL, JSON1 on SQLite), so a row reads the same whoever
wrote it (issue 12). The list never loads the JSON into Python. The log
page's citation tables come from `chat.admin.display` (templates under
`templates/admin/chat/chatlog/display/`); the one-line cells here use
`format_html`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db.models import Q, QuerySet, Subquery
from django.db.models.functions import Substr
from django.http import HttpRequest
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from chat.admin import display as admin_display
from chat.backfill import backfill_rows
from chat.citation_queries import (
    FLAGGED,
    STATES,
    SUPPORT_CHOICES,
    HasCitationState,
    HasSupportStatus,
    NamesAccount,
    SourceContains,
)
from chat.models import ChatLog
from chat.selectors import chat_logs_with_citation_counts, chat_logs_with_support_counts
from citations.summary import MALFORMED, UNTYPED, classify_citation
from citations.support import PARTLY_SUPPORTED, SUPPORT_STATUSES, UNSUPPORTED, support_status
from citations.uuids import parse_uuid

if TYPE_CHECKING:
    from chat.selectors import ChatLogWithCounts

from chat.admin.readonly import ReadOnlyAdmin

#: Columns the log changelist never loads: the JSON and the long texts. The
#: list shows counts the database computes from the JSON and a short head of the question.
LIST_DEFERRED_FIELDS = ("citations", "inline_citations", "response", "user_message")
QUESTION_PREVIEW_LENGTH = 80
#: The query-string filters of the log list: the list filters' parameters and
#: the session page's link (`?session__exact=<id>`).
URL_LOOKUPS = frozenset(
    {
        "target_kind",
        "support",
        "prompt_version",
        "prompt_version__exact",
        "created_at__gte",
        "created_at__lt",
        "created_at__isnull",
        "session__exact",
        "session",
    }
)


class TargetKindFilter(admin.SimpleListFilter):
    """Logs with at least one citation (summary or inline) of a target kind,
    or with an untyped or a malformed one (`classify_citation`'s states).

    Asked of the JSON itself (`HasCitationState`: jsonpath `@?` over a GIN
    index on PostgreSQL, `json_each` on SQLite), so it holds for any row.
    """

    title = "target kind"
    parameter_name = "target_kind"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(state, state) for state in STATES]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value is None:
            return queryset
        if value not in STATES:
            return queryset.none()
        return queryset.filter(HasCitationState(value))


#: What the support filter and the list call each status.
SUPPORT_LABELS = {
    FLAGGED: "partly supported or unsupported",
    "supported": "supported",
    PARTLY_SUPPORTED: "partly supported",
    UNSUPPORTED: "unsupported",
    "unchecked": "unchecked (or none)",
}


#: What a list cell calls each status (narrow: the list must fit 1366 px, docs/admin.md).
SHORT_LABELS = {**SUPPORT_LABELS, PARTLY_SUPPORTED: "partly", "unchecked": "unchecked"}


class SupportStatusFilter(admin.SimpleListFilter):
    """Logs with at least one inline citation of a support status (SPEC 15, docs/support.md), or `flagged`:
    partly supported or unsupported, the answers a supervisor reads first.

    Asked of the JSON itself (`HasSupportStatus`: jsonpath `@?` over the
    inline citations' GIN index on PostgreSQL, as the kind filter is;
    `json_each` on SQLite), so it holds for any row, old rows included.
    """

    title = "citation support"
    parameter_name = "support"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(choice, SUPPORT_LABELS[choice]) for choice in SUPPORT_CHOICES]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value is None:
            return queryset
        if value not in SUPPORT_CHOICES:
            return queryset.none()
        return queryset.filter(HasSupportStatus(value))


class CappedCountPaginator(Paginator):
    """A paginator that counts at most `cap` + 1 rows (`count` is then `cap` + 1 and `capped` True).

    The changelist counts the filtered rows on every page view. On a large
    table a filter that keeps many rows (`?target_kind=account`) would test
    the JSON of every one of them just to print a total; counting stops at
    the first `cap` + 1 instead, and the page says "more than 1000".
    """

    cap = 1000

    @cached_property
    def count(self) -> int:
        # Only the primary keys, unordered: the list's annotations (the
        # counts) are not computed for the counted rows, and PostgreSQL may
        # stop at the first rows it meets.
        rows: QuerySet = self.object_list  # type: ignore[assignment]  # the changelist passes a QuerySet
        return rows.order_by().values("pk")[: self.cap + 1].count()

    @property
    def capped(self) -> bool:
        """True when there are more rows than `cap`."""
        return self.count > self.cap


class ChatLogChangeList(ChangeList):
    """The log list: JSON and long text columns deferred, only a head of the
    question read, counts computed by the database over `citations`."""

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet:
        queryset = super().get_queryset(request, exclude_parameters)
        queryset = queryset.annotate(question_head=Substr("user_message", 1, QUESTION_PREVIEW_LENGTH + 1))
        queryset = chat_logs_with_support_counts(chat_logs_with_citation_counts(queryset))
        return queryset.defer(*LIST_DEFERRED_FIELDS)


@admin.register(ChatLog)
class ChatLogAdmin(ReadOnlyAdmin):
    """Read-only turns: counts, kind/date/prompt filters and search computed
    from the JSON; a detail page with citation tables."""

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
        "support_column",
    )
    list_display_links = ("created_at", "question")
    list_select_related = ("session", "user")
    list_per_page = 100
    list_max_show_all = 200
    show_full_result_count = False
    paginator = CappedCountPaginator
    ordering = ("-created_at", "-id")
    # A date filter rather than `date_hierarchy`: the hierarchy runs a MIN/MAX
    # and a DISTINCT over the dates of every matching row on each page view;
    # these links cost no query. Any range works by hand in the URL:
    # ?created_at__gte=2026-11-01&created_at__lt=2026-11-08.
    list_filter = (
        "prompt_version",
        TargetKindFilter,
        SupportStatusFilter,
        ("created_at", admin.DateFieldListFilter),
    )
    # The search itself is `get_search_results`; this only turns the box on.
    search_fields = ("user_message",)
    search_help_text = (
        "Each word must match: a source substring (any case), or exactly an account id, "
        "a log or session id, or a username."
    )
    actions = ("recompute_targets",)
    fieldsets = (
        (None, {"fields": ("id", "session_link", "user", "prompt_version", "model", "created_at")}),
        ("Counts (over citations)", {"fields": ("counts", "support_counts")}),
        ("Turn", {"fields": ("user_message", "answer")}),
        ("Citations", {"fields": ("citations_table",)}),
        ("Inline citations", {"fields": ("inline_citations_table",)}),
        ("Raw JSON", {"fields": ("citations_json", "inline_citations_json")}),
    )
    readonly_fields = (
        "counts",
        "support_counts",
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

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        # Django allows any lookup on a local field from the URL, and some of
        # those fail only when the query runs (a 500): `?user_message__regex=(`,
        # `?citations__contains=x` on SQLite. Only the parameters our own
        # filters and links write are allowed; anything else is Django's
        # disallowed-lookup answer (400). Bad values of allowed ones
        # (`?created_at__gte=yesterday`) get Django's `?e=1` redirect.
        return lookup in URL_LOOKUPS

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        """Every whitespace-separated word must match one of:

        - a source substring, any case, non-ASCII included (`SourceContains`);
        - exactly one of the account ids a readable `account`/`accounts`
          target names, case-sensitive (`NamesAccount`);
        - exactly the log's id or its session's id (a UUID), or the owner's
          username.

        All from the JSON itself, both columns. The username is a scalar
        subquery, not a JOIN, so that PostgreSQL can answer the OR with
        one index per arm (BitmapOr).
        """
        users = get_user_model().objects
        for word in search_term.split():
            owner = Subquery(users.filter(**{get_user_model().USERNAME_FIELD: word}).values("pk")[:1])
            matches = Q(SourceContains(word)) | Q(NamesAccount(word)) | Q(user_id=owner)
            as_uuid = parse_uuid(word)
            if as_uuid is not None:
                matches |= Q(pk=as_uuid) | Q(session_id=as_uuid)
            queryset = queryset.filter(matches)
        return queryset, False

    # -- list columns ------------------------------------------------------

    def action_checkbox(self, log: ChatLog) -> SafeString:
        # Django labels each checkbox with `str(log)`, which reads
        # `user_message`: a deferred column, so one query per row. Same label,
        # from the question head the list already loaded. The HTML is the
        # one Django's CheckboxInput renders, written with format_html:
        # rendering the widget's template per row cost about half of a
        # 100-row page (bench/admin.py).
        label = f"{log.created_at:%Y-%m-%d %H:%M} {self._question_head(log)[:60]}"
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            helpers.ACTION_CHECKBOX_NAME,
            str(log.pk),
            f"Select this object for an action - {label}",
        )

    @staticmethod
    def _question_head(log: ChatLog) -> str:
        # `question_head` (changelist only) is one character longer than shown, to know whether to add "…".
        head = getattr(log, "question_head", None)
        return head if head is not None else log.user_message[: QUESTION_PREVIEW_LENGTH + 1]

    @admin.display(description="question", ordering="user_message")
    def question(self, log: ChatLog) -> str:
        head = self._question_head(log)
        return head[:QUESTION_PREVIEW_LENGTH] + ("…" if len(head) > QUESTION_PREVIEW_LENGTH else "")

    # Counts over `citations` (the turn's summary list), computed by the
    # database in `ChatLogChangeList.get_queryset`: no JSON is loaded.
    @admin.display(description="citations", ordering="citation_total")
    def citations_column(self, log: ChatLogWithCounts) -> int:
        return log.citation_total

    @admin.display(description="typed", ordering="typed_total")
    def typed_column(self, log: ChatLogWithCounts) -> int:
        return log.typed_total

    @admin.display(description="untyped", ordering="untyped_total")
    def untyped_column(self, log: ChatLogWithCounts) -> int:
        return log.untyped_total

    @admin.display(description="malformed", ordering="malformed_total")
    def malformed_column(self, log: ChatLogWithCounts) -> int:
        return log.malformed_total

    @admin.display(description="support")
    def support_column(self, log: ChatLog) -> str:
        # Counts over `inline_citations` per support status, computed by the database in one pass
        # (`chat_logs_with_support_counts`); one line per status held.
        counts = getattr(log, "support_counts", None) or {}
        lines = [(counts.get(status, 0), SHORT_LABELS[status]) for status in SUPPORT_STATUSES]
        return format_html_join("", "<div>{} {}</div>", [(n, label) for n, label in lines if n])

    @admin.display(description="session", ordering="session__title")
    def session_link(self, log: ChatLog) -> str:
        url = reverse("admin:chat_chatsession_change", args=[log.session_id])
        return format_html('<a href="{}">{}</a>', url, str(log.session))

    # -- detail page (read-only fields) -------------------------------------

    @admin.display(description="counts")
    def counts(self, log: ChatLog) -> str:
        # The detail page has the JSON loaded: the same states, in Python.
        states = [classify_citation(entry)[0] for entry in log.citations] if isinstance(log.citations, list) else []
        untyped, malformed = states.count(UNTYPED), states.count(MALFORMED)
        return format_html(
            "{} citations: {} typed, {} untyped, {} malformed",
            len(states),
            len(states) - untyped - malformed,
            untyped,
            malformed,
        )

    @admin.display(description="support (inline citations)")
    def support_counts(self, log: ChatLog) -> str:
        # The detail page has the JSON loaded: the same statuses, in Python (`support_status`).
        column = log.inline_citations if isinstance(log.inline_citations, list) else []
        statuses = [support_status(entry) for entry in column]
        return format_html_join(
            ", ", "{} {}", [(statuses.count(status), SUPPORT_LABELS[status]) for status in SUPPORT_STATUSES]
        )

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

    # The stubs (django-stubs 6) add Django 6.0's `action_location`; Django 5.2 passes none.
    def response_action(self, request: HttpRequest, queryset: QuerySet) -> Any:  # type: ignore[override]
        # Django filters `pk__in=<posted ids>`, which raises on a forged id that
        # is not a UUID (a 500): keep only the ids that can be ours.
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        valid = [value for value in selected if parse_uuid(value) is not None]
        if len(valid) != len(selected):
            post = request.POST.copy()
            post.setlist(helpers.ACTION_CHECKBOX_NAME, valid)
            # Django lets a view replace request.POST; the stubs type it immutable.
            request.POST = post  # type: ignore[assignment]
        return super().response_action(request, queryset)

    @admin.action(description="Recompute targets from sources", permissions=["recompute"])
    def recompute_targets(self, request: HttpRequest, queryset: QuerySet) -> None:
        """docs/backfill.md on the selected rows: citations that already have a
        target are never touched; only the two JSON columns are written."""
        selected = list(queryset.values_list("pk", flat=True))
        report = backfill_rows(model=ChatLog, ids=selected)
        skipped = (
            f" {len(report.malformed)} log(s) skipped: a JSON column is not a list of objects."
            if report.malformed
            else ""
        )
        if report.typed_total == 0:
            self.message_user(
                request,
                f"No citation could be typed from its source in the {len(selected)} selected log(s).{skipped}",
                messages.INFO,
            )
            return
        self.message_user(
            request,
            f"Typed {report.typed_total} citation(s) (summary and inline) in {report.rows_changed} "
            f"of {len(selected)} selected log(s).{skipped}",
            messages.SUCCESS,
        )
