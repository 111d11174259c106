from django.apps import AppConfig


class FinanceConfig(AppConfig):
    """The user's financial data (accounts, holdings) and the `execute_sql` tool over its views (SPEC 13)."""

    name = "finance"
    verbose_name = "Financial data"
    default_auto_field = "django.db.models.BigAutoField"
