from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.signals import request_finished
from django.db.backends.signals import connection_created


def _register_sqlite_functions(sender: Any, connection: Any, **kwargs: Any) -> None:
    # SQLite's lower()/LIKE fold ASCII only; the admin's source search
    # (`chat.citation_queries.SourceContains`) must find "impôt" from "IMPÔT".
    if connection.vendor == "sqlite":
        connection.connection.create_function(
            "silvia_lower", 1, lambda text: text.lower() if isinstance(text, str) else text, deterministic=True
        )


def _sample_pool(sender: Any, **kwargs: Any) -> None:
    # The pool's use, at most once a second per process (docs/metrics.md); metrics load with the first request.
    from telemetry.metrics import sample_pool

    sample_pool()


class ChatConfig(AppConfig):
    """The chat logs app: models, services, API, admin and commands."""

    name = "chat"
    verbose_name = "Chat logs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Nothing else: what only a turn or a tool needs (the anthropic SDK,
        # pglast, httpx) is imported where it is used, so `manage.py` commands,
        # cron jobs and every process's start do not pay seconds of CPU for it
        # (docs/decisions.md#start-up-imports-nothing-only-a-turn-needs;
        # tests/silvia/test_startup.py keeps it so).
        connection_created.connect(_register_sqlite_functions, dispatch_uid="chat.sqlite_functions")
        if any(database.get("OPTIONS", {}).get("pool") for database in settings.DATABASES.values()):
            request_finished.connect(_sample_pool, dispatch_uid="telemetry.metrics.sample_pool")
