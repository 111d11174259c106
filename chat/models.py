"""Models mirroring the production chat tables.

`chat_sessions` and `ai_chat_logs` are written only through
`chat.services` (no logic in `save()` or signals): the service layer computes
the citations' targets and keeps every column consistent.
"""
import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone


class PromptVersion(models.TextChoices):
    """The system prompt a turn ran under: `v5` asks the model to select account ids, `legacy` is frozen."""

    V5 = "v5", "v5"
    LEGACY = "legacy", "legacy"


class ChatSession(models.Model):
    """A conversation: the turns (`ChatLog` rows) of one user under one id."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_sessions")
    title = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "chat_sessions"
        ordering = ["-updated_at", "-created_at"]
        # The list's order within one user: its count and any page are index scans.
        indexes = [models.Index(fields=["user", "-updated_at", "-created_at", "-id"], name="chat_sessions_user_order")]

    def __str__(self) -> str:
        return self.title or str(self.id)


class ChatLog(models.Model):
    """One turn (SPEC section 6): the user message, the answer and its citations.

    `citations` and `inline_citations` are JSON lists exactly as the service
    computed them; readers parse targets with `parse_citation_target` and
    never rewrite them.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="logs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_logs")
    user_message = models.TextField()
    response = models.TextField(blank=True, default="")
    citations = models.JSONField(default=list, blank=True)
    inline_citations = models.JSONField(default=list, blank=True)
    prompt_version = models.CharField(max_length=16, choices=PromptVersion.choices)
    model = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    # Summary of the JSON columns (`citations.summary.summarize_citations`),
    # written by the service layer and the backfill whenever they write the
    # JSON. The admin lists counts without loading the JSON and filters and
    # searches with plain string lookups: JSON containment (`__contains`) does
    # not exist on SQLite, and a LIKE over a short delimited column is cheap
    # next to decoding every row's JSON. Those LIKE scans read narrow columns,
    # not the JSON; a trigram index (pg_trgm) would make them index scans on
    # PostgreSQL if staff filters ever become slow.
    citation_count = models.PositiveIntegerField(default=0)
    typed_count = models.PositiveIntegerField(default=0)
    untyped_count = models.PositiveIntegerField(default=0)
    malformed_count = models.PositiveIntegerField(default=0)
    target_kinds = models.CharField(max_length=200, blank=True, default="", help_text='e.g. "|account|untyped|"')
    account_ids = models.TextField(blank=True, default="", help_text='e.g. "|FN30U5GCSQHz2AnbS0K1av9RZKUbXKLvJqY6U|"')
    sources = models.TextField(blank=True, default="", help_text="distinct sources, one per line")

    class Meta:
        db_table = "ai_chat_logs"
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["session", "created_at"], name="ai_chat_logs_session_created"),
            models.Index(fields=["created_at"], name="ai_chat_logs_created"),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.user_message[:60]}"
