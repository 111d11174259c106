from django.apps import AppConfig


class DevtoolsConfig(AppConfig):
    """Development tools (the recorded model and its `serve_recorded_model` command); not for production."""

    name = "devtools"
    verbose_name = "Development tools"
