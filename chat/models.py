"""Models mirroring the production chat tables (live turns are `live.models`).

`chat_sessions` and `ai_chat_logs` are written only through
`chat.services` (no logic in `save()` or signals): the service layer computes
the citations' targets and keeps every column consistent.
"""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from chat.json_array_check import JsonTypeIsArray


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
    """One turn (docs/turns.md): the user message, the answer and its citations.

    `citations` and `inline_citations` are JSON arrays (check constraints)
    exactly as the writer stored them; readers parse targets with
    `parse_citation_target` and never rewrite them. Admin counts and filters
    are computed from them (`chat.citation_queries`), never stored beside them.
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

    class Meta:
        db_table = "ai_chat_logs"
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["session", "created_at"], name="ai_chat_logs_session_created"),
            models.Index(fields=["created_at"], name="ai_chat_logs_created"),
        ]
        # Readers (the API, the admin's JSON queries) rely on both columns
        # being arrays; a double-encoded string is refused at the door. The
        # GIN and trigram indexes the admin reads through are PostgreSQL-only
        # and live in migration 0003, not here.
        constraints = [
            models.CheckConstraint(condition=JsonTypeIsArray("citations"), name="ai_chat_logs_citations_is_array"),
            models.CheckConstraint(
                condition=JsonTypeIsArray("inline_citations"), name="ai_chat_logs_inline_citations_is_array"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.user_message[:60]}"


class UserWriteMark(models.Model):
    """How many times a user's chat data was written: read-your-writes on the read replica (`chat.replica`).

    `seq` grows by one in the transaction of each write (`chat.replica.note_user_writes`), so a replica
    that shows a user's latest `seq` has replayed all of that user's writes. A user who never wrote has
    no row (0).
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+")
    seq = models.BigIntegerField(default=0)

    class Meta:
        db_table = "chat_user_write_marks"

    def __str__(self) -> str:
        return f"{self.user_id}: {self.seq}"
