"""Models mirroring the aggregated financial data the assistant reads (SPEC 3, 13).

A `Connection` is one link to a data source (a Plaid item, a SnapTrade
connection, the manual-accounts store, a crypto wallet); it carries the
secrets that must never become ids (`clerk_id`, `item_id`, `access_token`).
An `Account` belongs to one connection; a `Holding` is a position of an
account in a `Security` (public market data, shared by all users).

The model reads these only through the three SQL views created by migration
0002 (`account_details`, `holding_details`, `public_holding_details`).
`user` is repeated on `Account` and `Holding` so that PostgreSQL's row-level
security filters each table by one column.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models

KNOWN_PROVIDERS = ("plaid", "manual", "snaptrade")
"""The `source` values that name a provider (SPEC 3); any other source (a crypto wallet) names no account."""

LIABILITY_TYPES = ("credit", "loan")
"""Account types whose balance is owed, not owned (counted negative in totals)."""


class Connection(models.Model):
    """One link to a data source for one user: a Plaid item, a SnapTrade connection, manual accounts, a wallet."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="finance_connections")
    source = models.CharField(max_length=32, help_text="plaid, manual, snaptrade, or another source such as a wallet")
    institution_name = models.CharField(max_length=200, blank=True, default="")
    clerk_id = models.CharField(max_length=64, blank=True, default="", help_text="the auth provider's user id")
    item_id = models.CharField(max_length=128, blank=True, default="", help_text="the provider's item/connection id")
    access_token = models.CharField(max_length=256, blank=True, default="", help_text="the provider's access token")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "finance_connection"
        ordering = ["id"]
        indexes = [models.Index(fields=["user", "updated_at"], name="finance_conn_user_updated")]

    def __str__(self) -> str:
        return self.institution_name or self.source


class Account(models.Model):
    """One account: balances, type and the provider's id for it (`source_account_id`)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="finance_accounts")
    connection = models.ForeignKey(Connection, on_delete=models.CASCADE, related_name="accounts")
    source_account_id = models.CharField(max_length=128, help_text="the provider's id: Plaid account_id, SnapTrade or manual uuid, wallet address")
    name = models.CharField(max_length=200, help_text="the label the user sees (account_name)")
    display_name = models.CharField(max_length=200, blank=True, default="")
    official_name = models.CharField(max_length=200, blank=True, default="")
    type = models.CharField(max_length=32, help_text="depository, credit, loan, investment, property, crypto")
    subtype = models.CharField(max_length=32, blank=True, default="")
    mask = models.CharField(max_length=8, blank=True, default="")
    currency = models.CharField(max_length=3, default="USD")
    current_balance = models.DecimalField(max_digits=18, decimal_places=2, null=True, blank=True)
    available_balance = models.DecimalField(max_digits=18, decimal_places=2, null=True, blank=True)
    credit_limit = models.DecimalField(max_digits=18, decimal_places=2, null=True, blank=True)
    purchase_apr = models.DecimalField(max_digits=7, decimal_places=3, null=True, blank=True, help_text="percent")
    interest_rate = models.DecimalField(max_digits=7, decimal_places=3, null=True, blank=True, help_text="percent")
    origination_date = models.DateField(null=True, blank=True)
    monthly_payment = models.DecimalField(max_digits=18, decimal_places=2, null=True, blank=True)
    escrow_payment = models.DecimalField(max_digits=18, decimal_places=2, null=True, blank=True)
    escrow_balance = models.DecimalField(max_digits=18, decimal_places=2, null=True, blank=True)
    remaining_term_months = models.IntegerField(null=True, blank=True)
    contributions_ytd = models.DecimalField(max_digits=18, decimal_places=2, null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "finance_account"
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["user", "source_account_id"], name="finance_account_user_source_id"),
        ]
        indexes = [models.Index(fields=["user", "updated_at"], name="finance_account_user_updated")]

    def __str__(self) -> str:
        return self.label

    @property
    def source(self) -> str:
        """The connection's source (`plaid`, `manual`, `snaptrade` or another)."""
        return self.connection.source

    @property
    def label(self) -> str:
        """A readable name: the display name, else the name, else the official name."""
        return self.display_name or self.name or self.official_name or "Account"

    @property
    def is_liability(self) -> bool:
        """Whether the balance is owed (credit cards, loans)."""
        return self.type in LIABILITY_TYPES


class Security(models.Model):
    """A security's public market data (shared by all users): ticker, name, last close."""

    ticker = models.CharField(max_length=16, blank=True, default="")
    name = models.CharField(max_length=200)
    type = models.CharField(max_length=32, help_text="equity, etf, mutual fund, crypto, cash")
    exchange = models.CharField(max_length=16, blank=True, default="", help_text="blank when not exchange-listed")
    close_price = models.DecimalField(max_digits=18, decimal_places=4, null=True, blank=True)
    close_price_as_of = models.DateField(null=True, blank=True)
    currency = models.CharField(max_length=3, default="USD")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "finance_security"
        ordering = ["ticker", "id"]
        verbose_name_plural = "securities"

    def __str__(self) -> str:
        return self.ticker or self.name


class Holding(models.Model):
    """A position of an account in a security, valued by the institution."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="finance_holdings")
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="holdings")
    security = models.ForeignKey(Security, on_delete=models.PROTECT, related_name="holdings")
    quantity = models.DecimalField(max_digits=24, decimal_places=8)
    institution_price = models.DecimalField(max_digits=18, decimal_places=4, null=True, blank=True)
    institution_value = models.DecimalField(max_digits=18, decimal_places=2, null=True, blank=True)
    cost_basis = models.DecimalField(max_digits=18, decimal_places=2, null=True, blank=True)
    currency = models.CharField(max_length=3, default="USD")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "finance_holding"
        ordering = ["account_id", "-institution_value", "id"]
        indexes = [models.Index(fields=["user", "updated_at"], name="finance_holding_user_updated")]

    def __str__(self) -> str:
        return f"{self.security} × {self.quantity}"
