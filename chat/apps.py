from django.apps import AppConfig


class ChatConfig(AppConfig):
    """The chat logs app: models, services, API, admin and commands."""

    name = "chat"
    verbose_name = "Chat logs"
    default_auto_field = "django.db.models.BigAutoField"
