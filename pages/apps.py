from django.apps import AppConfig


class PagesConfig(AppConfig):
    """Server-rendered pages for signed-in users: sessions, chips, accounts (docs/pages.md)."""

    name = "pages"
