"""Citation targets: what a citation's `source` points at (docs/targets.md).

One frozen, slotted dataclass per kind. `to_json()` writes the wire format
(camelCase keys, `kind` first) and `parse_citation_target()` reads it back
without ever raising. Two targets are equal exactly when their JSON is equal:
dataclass equality compares the class (so the kind) and every field, and
`AccountsTarget.accounts` is a tuple, so order counts as it does in JSON.

The account-pooling rule shared by `execute_sql` groups (docs/citable.md) and the
turn registry (docs/registry.md) is `citations.pooling`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias, TypeGuard

__all__ = [
    "LIBRARY_KINDS",
    "PROVIDERS",
    "TARGET_KINDS",
    "TARGET_TYPES",
    "AccountRef",
    "AccountTarget",
    "AccountsTarget",
    "AnalysisTarget",
    "CardDocumentTarget",
    "CitationTarget",
    "MarketDataTarget",
    "MortgageReferenceTarget",
    "PortfolioTarget",
    "Provider",
    "TaxReferenceTarget",
    "WebTarget",
    "parse_account_ref",
    "parse_citation_target",
]

Provider: TypeAlias = Literal["plaid", "manual", "snaptrade"]
"""Who holds an account. For routing only: never shown to end users (docs/privacy.md)."""

PROVIDERS: frozenset[str] = frozenset({"plaid", "manual", "snaptrade"})
"""The known `provider` values; anything else reads as `None` (docs/targets.md)."""


def _is_nonempty_str(value: object) -> TypeGuard[str]:
    # `isinstance(True, str)` is False, so bools and numbers never pass.
    return isinstance(value, str) and value != ""


def is_provider(value: object) -> TypeGuard[Provider]:
    """Whether `value` is one of `PROVIDERS` (matched exactly). Never raises."""
    # Check the type before the set lookup: an unhashable value (a list or an
    # object from JSON) would make `in PROVIDERS` raise TypeError.
    return isinstance(value, str) and value in PROVIDERS


def _provider_or_none(value: object) -> Provider | None:
    return value if is_provider(value) else None


def _check_account(account_id: object, provider: object) -> None:
    """The field rules shared by `AccountRef` and `AccountTarget`."""
    # Inlined checks: SQL results may build one of these per account group.
    if not isinstance(account_id, str) or not account_id:
        raise ValueError("account_id must be a non-empty string")
    if provider is not None and not (isinstance(provider, str) and provider in PROVIDERS):
        raise ValueError("provider must be 'plaid', 'manual', 'snaptrade' or None")


@dataclass(frozen=True, slots=True)
class AccountRef:
    """One of the user's accounts: `{"accountId": str, "provider": str | null}`.

    `account_id` is a non-empty string (docs/accounts.md decides which strings
    rows may yield; a parsed target may carry any non-empty string).
    `provider` is one of `PROVIDERS` or `None` when the rows did not say.

    Raises `ValueError` when built with other values, so every `AccountRef`
    serialises to JSON that `parse_account_ref` reads back equal.
    """

    account_id: str
    provider: Provider | None = None

    def __post_init__(self) -> None:
        _check_account(self.account_id, self.provider)

    def to_json(self) -> dict[str, Any]:
        """`{"accountId": ..., "provider": ...}` (docs/targets.md)."""
        return {"accountId": self.account_id, "provider": self.provider}


class CitationTarget:
    """Base of the target kinds (docs/targets.md); never instantiated itself.

    Subclasses are frozen, slotted dataclasses with a class-level `kind`.
    `to_json()` returns a fresh dict whose first key is `"kind"`.
    """

    __slots__ = ()
    kind: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        """The target's wire JSON (a new dict, `"kind"` first)."""
        return {"kind": self.kind}


@dataclass(frozen=True, slots=True)
class _LibraryTarget(CitationTarget):
    """Shared shape of the three library kinds: `url` is a non-empty str or None."""

    url: str | None

    def __post_init__(self) -> None:
        if self.url is not None and not _is_nonempty_str(self.url):
            raise ValueError(f"{self.kind} url must be a non-empty string or None")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "url": self.url}


@dataclass(frozen=True, slots=True)
class WebTarget(CitationTarget):
    """`{"kind": "web", "url": str}`: a web page; `url` is a non-empty string."""

    kind: ClassVar[str] = "web"
    url: str

    def __post_init__(self) -> None:
        if not _is_nonempty_str(self.url):
            raise ValueError("web url must be a non-empty string")

    def to_json(self) -> dict[str, Any]:
        return {"kind": "web", "url": self.url}


@dataclass(frozen=True, slots=True)
class TaxReferenceTarget(_LibraryTarget):
    """`{"kind": "tax_reference", "url": str | null}`: a tax-authority document."""

    kind: ClassVar[str] = "tax_reference"


@dataclass(frozen=True, slots=True)
class CardDocumentTarget(_LibraryTarget):
    """`{"kind": "card_document", "url": str | null}`: a credit-card issuer document."""

    kind: ClassVar[str] = "card_document"


@dataclass(frozen=True, slots=True)
class MortgageReferenceTarget(_LibraryTarget):
    """`{"kind": "mortgage_reference", "url": str | null}`: a mortgage regulation or guide."""

    kind: ClassVar[str] = "mortgage_reference"


@dataclass(frozen=True, slots=True)
class MarketDataTarget(CitationTarget):
    """`{"kind": "market_data", "ticker": str}`: live market data for a ticker (non-empty)."""

    kind: ClassVar[str] = "market_data"
    ticker: str

    def __post_init__(self) -> None:
        if not _is_nonempty_str(self.ticker):
            raise ValueError("ticker must be a non-empty string")

    def to_json(self) -> dict[str, Any]:
        return {"kind": "market_data", "ticker": self.ticker}


@dataclass(frozen=True, slots=True)
class AnalysisTarget(CitationTarget):
    """`{"kind": "analysis"}`: a computation or printed output of `execute_python`."""

    kind: ClassVar[str] = "analysis"


@dataclass(frozen=True, slots=True)
class PortfolioTarget(CitationTarget):
    """`{"kind": "portfolio"}`: SQL rows about the portfolio as a whole."""

    kind: ClassVar[str] = "portfolio"


@dataclass(frozen=True, slots=True)
class AccountTarget(CitationTarget):
    """`{"kind": "account", "accountId": str, "provider": str | null}`: one account.

    Same field rules as `AccountRef`; `ref` gives it as an `AccountRef`.
    """

    kind: ClassVar[str] = "account"
    account_id: str
    provider: Provider | None = None

    def __post_init__(self) -> None:
        _check_account(self.account_id, self.provider)

    @property
    def ref(self) -> AccountRef:
        """This target's account as an `AccountRef`."""
        return AccountRef(self.account_id, self.provider)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "account", "accountId": self.account_id, "provider": self.provider}


@dataclass(frozen=True, slots=True)
class AccountsTarget(CitationTarget):
    """`{"kind": "accounts", "accounts": [AccountRef JSON, ...]}`: several accounts.

    `accounts` is a non-empty tuple of `AccountRef` (a list or other iterable
    is converted to a tuple, so targets stay hashable and compare like JSON).
    A one-ref `accounts` is kept as `accounts`: parsing never re-kinds.
    """

    kind: ClassVar[str] = "accounts"
    accounts: tuple[AccountRef, ...]

    def __post_init__(self) -> None:
        accounts = tuple(self.accounts)
        if not accounts:
            raise ValueError("accounts must not be empty")
        if not all(isinstance(ref, AccountRef) for ref in accounts):
            raise TypeError("accounts must hold AccountRef values")
        object.__setattr__(self, "accounts", accounts)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "accounts", "accounts": [ref.to_json() for ref in self.accounts]}


_SINGLETONS: dict[str, CitationTarget] = {
    "analysis": AnalysisTarget(),
    "portfolio": PortfolioTarget(),
}
_LIBRARY_KINDS: dict[str, type[_LibraryTarget]] = {
    "tax_reference": TaxReferenceTarget,
    "card_document": CardDocumentTarget,
    "mortgage_reference": MortgageReferenceTarget,
}


#: The target types, in docs/targets.md order.
TARGET_TYPES: tuple[type[CitationTarget], ...] = (
    WebTarget,
    TaxReferenceTarget,
    CardDocumentTarget,
    MortgageReferenceTarget,
    MarketDataTarget,
    AnalysisTarget,
    AccountTarget,
    AccountsTarget,
    PortfolioTarget,
)
TARGET_KINDS: tuple[str, ...] = tuple(target.kind for target in TARGET_TYPES)
"""Every target `kind`, in docs/targets.md order (for admin filters, the API schema and the admin's SQL)."""
LIBRARY_KINDS: tuple[str, ...] = tuple(target.kind for target in TARGET_TYPES if issubclass(target, _LibraryTarget))
"""The three library kinds, whose `url` is a non-empty string or null."""


def parse_account_ref(value: object) -> AccountRef | None:
    """Read `{"accountId": str, "provider"?: str | null}` (docs/targets.md).

    Returns `None` unless `value` is a dict with a non-empty string
    `accountId`. An unknown or missing `provider` (matched exactly, so
    `"Plaid"` is unknown) becomes `None`. Never raises.
    """
    if not isinstance(value, dict):
        return None
    account_id = value.get("accountId")
    if not _is_nonempty_str(account_id):
        return None
    return AccountRef(account_id, _provider_or_none(value.get("provider")))


def parse_citation_target(value: object) -> CitationTarget | None:
    """Read a target from its JSON (docs/targets.md); never raises.

    `value` is any JSON-like Python value (as `json.loads` returns). Returns
    `None` for a non-object, a missing or unknown `kind`, or a known kind with
    missing or wrongly typed fields: `web.url` a non-empty string; the library
    kinds' `url` present and a non-empty string or null; `ticker` a non-empty
    string; `accountId` a non-empty string; `accounts` a non-empty list of
    valid refs (one bad ref spoils the target). Unknown extra keys are ignored.
    """
    if not isinstance(value, dict):
        return None
    kind = value.get("kind")
    if not isinstance(kind, str):
        return None
    if kind in _SINGLETONS:
        return _SINGLETONS[kind]
    if kind == "web":
        url = value.get("url")
        return WebTarget(url) if _is_nonempty_str(url) else None
    library = _LIBRARY_KINDS.get(kind)
    if library is not None:
        if "url" not in value:
            return None
        url = value["url"]
        if url is None or _is_nonempty_str(url):
            return library(url)
        return None
    if kind == "market_data":
        ticker = value.get("ticker")
        return MarketDataTarget(ticker) if _is_nonempty_str(ticker) else None
    if kind == "account":
        ref = parse_account_ref(value)
        return None if ref is None else AccountTarget(ref.account_id, ref.provider)
    if kind == "accounts":
        raw = value.get("accounts")
        if not isinstance(raw, list) or not raw:
            return None
        refs = []
        for item in raw:
            ref = parse_account_ref(item)
            if ref is None:
                return None
            refs.append(ref)
        return AccountsTarget(tuple(refs))
    return None
