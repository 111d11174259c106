"""Citation targets: the pure domain (docs/targets.md, accounts.md, citable.md,
registry.md, privacy.md and backfill.md).

No ORM, no HTTP, no imports from `chat`. The public names are re-exported
here; each rule of docs/ lives in one named function of its module:

- `targets`: target types, `parse_citation_target`, account pooling (docs/targets.md)
- `accounts`: `is_account_id`, `account_ref_from_row` (docs/accounts.md)
- `urls`: `humanize_citation_url`, `account_path`, `account_id_candidates` (docs/citable.md, docs/privacy.md)
- `citable`: `to_citable_content`, `SearchResult`, one module per tool (docs/citable.md)
- `registry`: `TurnRegistry` (docs/registry.md)
- `backfill`: `backfill_target` (docs/backfill.md)
"""

from citations.accounts import account_ref_from_row, is_account_id
from citations.backfill import backfill_target
from citations.citable import SearchResult, to_citable_content
from citations.pooling import accounts_target, merge_account_refs
from citations.registry import TurnRegistry
from citations.targets import (
    PROVIDERS,
    TARGET_KINDS,
    AccountRef,
    AccountsTarget,
    AccountTarget,
    AnalysisTarget,
    CardDocumentTarget,
    CitationTarget,
    MarketDataTarget,
    MortgageReferenceTarget,
    PortfolioTarget,
    Provider,
    TaxReferenceTarget,
    WebTarget,
    parse_citation_target,
)
from citations.urls import account_id_candidates, account_path, humanize_citation_url

__all__ = [
    "PROVIDERS",
    "TARGET_KINDS",
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
    "SearchResult",
    "TaxReferenceTarget",
    "TurnRegistry",
    "WebTarget",
    "account_id_candidates",
    "account_path",
    "account_ref_from_row",
    "accounts_target",
    "backfill_target",
    "humanize_citation_url",
    "is_account_id",
    "merge_account_refs",
    "parse_citation_target",
    "to_citable_content",
]
