"""Models of live turns (docs/live.md): the turn a worker runs and its durable event log.

`live` owns them; their tables keep the names they were created with
(`chat_live_turns`, `chat_live_turn_events`: migration `live.0001` took them
over from `chat` without touching the database). Every write goes through
`live`'s services (admission, the engine, the event log); a worker's writes
are fenced by its `worker_token` (`LiveTurnQuerySet.running_for_worker`).
"""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from chat.models import PromptVersion


class LiveTurnStatus(models.TextChoices):
    """Where a live turn is (docs/live.md): waiting for a worker, running, stored (`done`) or ended by an `error`."""

    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


#: A turn that still holds its session (one per session) and counts against its user's limit.
ACTIVE_STATUSES = (LiveTurnStatus.QUEUED, LiveTurnStatus.RUNNING)


class LiveTurnQuerySet(models.QuerySet["LiveTurn"]):
    def running_for_worker(self, turn_id: uuid.UUID, token: uuid.UUID) -> "LiveTurnQuerySet":
        """The turn `turn_id` if it is running and `token` is its worker's (the fencing token); else nothing.

        Every write a worker makes goes through this filter, so a worker that
        another one took the turn from (a redelivered task) writes nothing.
        """
        return self.filter(pk=turn_id, worker_token=token, status=LiveTurnStatus.RUNNING)

    def active(self) -> "LiveTurnQuerySet":
        """Turns queued or running."""
        return self.filter(status__in=ACTIVE_STATUSES)


class LiveTurn(models.Model):
    """A turn the service runs itself (docs/live.md), durable across processes.

    `id` is the turn id and, once stored, the `ai_chat_logs` row's id, so a
    resumed turn that saves twice is stored once. A turn is `queued` until a
    job-engine worker takes it (`live.service.turn_acquire`), which gives
    it a new `worker_token`; a redelivered task (the same `task_id`) takes it
    again with another token (`resume_count` counts those), and the older
    worker's writes then match no row. A task of another id (a stale one, after
    the turn was queued again) does nothing. `checkpoint` is the state after the last tool round
    (`messages`, `events`, `citationTargets`, `step`, ...; `live.checkpoint`).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session_id = models.UUIDField(help_text="the chat session; the session row is written with the turn")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="live_turns")
    user_message = models.TextField()
    prompt_version = models.CharField(max_length=16, choices=PromptVersion.choices)
    status = models.CharField(max_length=16, choices=LiveTurnStatus.choices, default=LiveTurnStatus.QUEUED)
    checkpoint = models.JSONField(null=True, blank=True)
    last_seq = models.PositiveIntegerField(default=0, help_text="id of the last event in the log")
    worker_token = models.UUIDField(default=uuid.uuid4)
    task_id = models.UUIDField(
        default=uuid.uuid4, help_text="the id of the job-engine task that runs it (another task does nothing)"
    )
    sent_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="when its task reached the broker; a queued turn without it is sent again (live.sweeps)",
    )
    resume_count = models.PositiveIntegerField(default=0)
    error = models.JSONField(null=True, blank=True, help_text="the error event's data for a failed turn")
    stop_reason = models.CharField(
        max_length=32, blank=True, default="", help_text="the final message's stop_reason, once the turn is stored"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True, help_text="when a worker first took the turn")
    progressed_at = models.DateTimeField(
        null=True, blank=True, help_text="when its worker last wrote an event or a checkpoint"
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = LiveTurnQuerySet.as_manager()

    class Meta:
        db_table = "chat_live_turns"
        ordering = ["-created_at"]
        constraints = [
            # One queued or running turn per session (docs/live.md: a second POST is a 409).
            models.UniqueConstraint(
                fields=["session_id"],
                condition=models.Q(status__in=ACTIVE_STATUSES),
                name="chat_live_turns_one_active_per_session",
            ),
        ]
        indexes = [
            # Admission (docs/live.md "Admission"): a user's active turns, and the queue's depth.
            models.Index(fields=["user", "status"], name="chat_live_turns_user_status"),
            models.Index(fields=["status", "created_at"], name="chat_live_turns_status"),
        ]

    def __str__(self) -> str:
        return f"turn {self.id} ({self.status})"


class LiveTurnEvent(models.Model):
    """One SSE event of a live turn, appended before it is sent (docs/live.md).

    `seq` is the event's `id:` (1, 2, ... within the turn); `data` the JSON
    text sent as `data:`, stored as text so a replay sends it byte for byte.
    """

    turn = models.ForeignKey(LiveTurn, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    event = models.CharField(max_length=32)
    data = models.TextField()

    class Meta:
        db_table = "chat_live_turn_events"
        ordering = ["turn", "seq"]
        constraints = [models.UniqueConstraint(fields=["turn", "seq"], name="chat_live_turn_events_turn_seq")]

    def __str__(self) -> str:
        return f"{self.turn_id}#{self.seq} {self.event}"
