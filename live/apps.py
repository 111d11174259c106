from django.apps import AppConfig


class LiveConfig(AppConfig):
    """Live turns (docs/live.md): their models (`LiveTurn`, `LiveTurnEvent`) and admin, admission, the Celery
    task, the turn runner, the event log and its streams."""

    name = "live"
    verbose_name = "Live turns"
    default_auto_field = "django.db.models.BigAutoField"
