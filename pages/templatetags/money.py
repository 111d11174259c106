"""`{{ amount|money:currency }}`: an amount as a person reads it."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django import template

register = template.Library()

_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}


@register.filter
def money(value: object, currency: str = "USD") -> str:
    """`Decimal("-1234.5"), "USD"` -> `"−$1,234.50"`; an unknown currency is written after; None -> `"—"`."""
    if value is None or value == "":
        return "—"
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return str(value)
    sign = "−" if amount < 0 else ""
    digits = f"{abs(amount):,.2f}"
    symbol = _SYMBOLS.get(currency)
    return f"{sign}{symbol}{digits}" if symbol else f"{sign}{digits} {currency}"


@register.filter
def quantity(value: object) -> str:
    """A holding's quantity without trailing zeros: `Decimal("12.50000000")` -> `"12.5"`."""
    if value is None:
        return "—"
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return str(value)
    text = f"{amount:,f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
