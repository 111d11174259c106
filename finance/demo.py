"""Seeding the demo's financial data for `setup_demo` (SPEC 13): maya's and sam's accounts and holdings,
as `finance.demo_data` lists them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import transaction

from finance.demo_data import CLOSE_AS_OF, MAYA, MAYA_CLERK, SAM, SAM_CLERK, SECURITIES
from finance.models import Account, Connection, Holding, Security

D = Decimal


@transaction.atomic
def seed_user(*, user: Any, connections: list[tuple[str, str, str, str, list[dict[str, Any]]]], clerk_id: str) -> int:
    """Create or update `user`'s connections, accounts and holdings from `connections`; returns the account count."""
    securities = {}
    for ticker, fields in SECURITIES.items():
        securities[ticker], _ = Security.objects.update_or_create(
            ticker=ticker, defaults={**fields, "close_price_as_of": CLOSE_AS_OF}
        )
    count = 0
    for source, institution, item_id, token, accounts in connections:
        connection, _ = Connection.objects.update_or_create(
            user=user,
            source=source,
            institution_name=institution,
            defaults={"clerk_id": clerk_id, "item_id": item_id, "access_token": token},
        )
        for fields in accounts:
            fields = dict(fields)
            holdings = fields.pop("holdings", [])
            account, _ = Account.objects.update_or_create(
                user=user,
                source_account_id=fields.pop("source_account_id"),
                defaults={**fields, "connection": connection},
            )
            account.holdings.all().delete()
            Holding.objects.bulk_create(
                Holding(
                    user=user,
                    account=account,
                    security=securities[ticker],
                    quantity=quantity,
                    institution_price=(value / quantity).quantize(D("0.0001")),
                    institution_value=value,
                    cost_basis=(value * D("0.8")).quantize(D("0.01")),
                )
                for ticker, quantity, value in holdings
            )
            count += 1
    return count


def seed_demo_finance(*, maya: Any, sam: Any) -> int:
    """maya's and sam's demo accounts (idempotent); returns how many accounts were written."""
    return seed_user(user=maya, connections=MAYA, clerk_id=MAYA_CLERK) + seed_user(
        user=sam, connections=SAM, clerk_id=SAM_CLERK
    )
