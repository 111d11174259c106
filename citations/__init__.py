"""Citation targets: the pure domain (SPEC sections 2-5, 9 and 12).

No ORM, no HTTP, no imports from `chat`. The public names are re-exported
here; each SPEC rule lives in one named function of its module:

- `targets`: target types, `parse_citation_target`, account pooling (section 2)
- `accounts`: `is_account_id`, `account_ref_from_row` (section 3)
- `urls`: `humanize_citation_url`, `account_path`, `account_id_candidates` (sections 4, 9)
- `citable`: `to_citable_content`, `SearchResult` (section 4)
- `registry`: `TurnRegistry` (section 5)
- `backfill`: `backfill_target` (section 12)
"""

from citations.accounts import account_ref_from_row, is_account_id
from citations.backfill import backfill_target
from citations.citable import SearchResult, to_citable_content
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
    accounts_target,
    merge_account_refs,
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
