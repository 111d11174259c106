from django.apps import AppConfig


class LiveConfig(AppConfig):
    """Live turns (docs/live.md): admission, the Celery task, the turn runner, the event log and its streams.

    No models of its own: turns and their events are stored in `chat`'s
    `LiveTurn` and `LiveTurnEvent`. Installed so that Celery finds `live.tasks`.
    """

    name = "live"
    verbose_name = "Live turns"
