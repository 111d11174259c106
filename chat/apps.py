from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created


def _register_sqlite_functions(sender: Any, connection: Any, **kwargs: Any) -> None:
    # SQLite's lower()/LIKE fold ASCII only; the admin's source search
    # (`chat.citation_queries.SourceContains`) must find "impôt" from "IMPÔT".
    if connection.vendor == "sqlite":
        connection.connection.create_function(
            "silvia_lower", 1, lambda text: text.lower() if isinstance(text, str) else text, deterministic=True
        )


class ChatConfig(AppConfig):
    """The chat logs app: models, services, API, admin and commands."""

    name = "chat"
    verbose_name = "Chat logs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        connection_created.connect(_register_sqlite_functions, dispatch_uid="chat.sqlite_functions")
        # Import the turn runner (and the anthropic SDK, about a second to
        # import) at startup, not inside the first live turn.
        from chat.live import runner  # noqa: F401
