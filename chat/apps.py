from django.apps import AppConfig


class ChatConfig(AppConfig):
    """The chat logs app: models, services, API, admin and commands."""

    name = "chat"
    verbose_name = "Chat logs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Import the turn runner (and the anthropic SDK, about a second to
        # import) at startup, not inside the first live turn.
        from chat.live import runner  # noqa: F401
