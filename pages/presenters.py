"""Citation chips and cited spans for the pages (docs/turns.md#what-a-turn-stores, docs/privacy.md and docs/pages.md).

Pure: no ORM, no HTTP. `chip_for_citation` is the one place that turns a
stored citation into what a page shows (live turns too: the server renders
them, see `pages.markdown`).
Nothing here raises on stored data, whatever shape it has: a citation that
cannot be read falls back to its `source` and `title`, never disappears.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from citations.corpus import CORPUS_FOLDERS
from citations.support import PARTLY_SUPPORTED, UNSUPPORTED, read_support
from citations.targets import (
    AccountsTarget,
    AccountTarget,
    AnalysisTarget,
    CardDocumentTarget,
    MarketDataTarget,
    MortgageReferenceTarget,
    PortfolioTarget,
    TaxReferenceTarget,
    WebTarget,
    parse_citation_target,
)
from citations.urls import account_path
from citations.utf16 import utf16_index

__all__ = [
    "FINNHUB_SOURCE",
    "PORTFOLIO_PATH",
    "Chip",
    "ChipLink",
    "ChipSupport",
    "CitedSpan",
    "chip_for_citation",
    "cited_spans",
    "readable_file_name",
    "safe_href",
]

PORTFOLIO_PATH = "/portfolio/"
"""Where a `portfolio` chip links (the portfolio page)."""

CHIP_LABEL_FITS = 18
"""Characters of a chip label that fit in its narrowest width (pages.css `.chip__label`, 11rem on a phone)."""

FINNHUB_SOURCE = "silvia://market-data/finnhub"
"""The source whose `analysis` chip reads "Live data" (docs/citable.md and docs/pages.md)."""

# http(s) only, and no ASCII control character or space anywhere: browsers
# strip or ignore those, which is how `java\tscript:` style tricks get in.
_SAFE_URL = re.compile(r"^https?://[^\x00-\x20\x7f]+$", re.IGNORECASE)

_LIBRARY = (TaxReferenceTarget, CardDocumentTarget, MortgageReferenceTarget)
_LIBRARY_SOURCE = re.compile(rf"^silvia://(?:{'|'.join(map(re.escape, CORPUS_FOLDERS.values()))})/")

# A title that is a file name: what a library read stores when its sidecar has no title (docs/citable.md).
_FILE_NAME = re.compile(r"^[^\s/]+\.(?:md|markdown|txt|xml|html?|json|pdf)$", re.IGNORECASE)
_FILE_EXTENSION = re.compile(r"\.(?:md|markdown|txt|xml|html?|json|pdf)$", re.IGNORECASE)
# Words a file name writes in lower case that a reader expects otherwise ("ira-deadlines.md" -> "IRA deadlines").
_WORDS = {
    **{w: w.upper() for w in ("ira", "irs", "hsa", "fsa", "apr", "apy", "cfr", "usc", "rmd", "etf", "fdic")},
    **{w: w.upper() for w in ("heloc", "pmi", "ltv", "tila", "respa", "cfpb", "fha", "sep", "agi", "magi")},
    "roth": "Roth",
    "401k": "401(k)",
    "403b": "403(b)",
}


@dataclass(frozen=True, slots=True)
class ChipLink:
    """One entry of an `accounts` chip's list: a label and the account page path."""

    label: str
    href: str


@dataclass(frozen=True, slots=True)
class ChipSupport:
    """What a chip says of a citation its source does not fully back (SPEC 15, docs/support.md).

    `status` is `partly_supported` or `unsupported`; `figures` the figures
    of the span not found in the source, as the answer writes them. `note`
    joins the chip's accessible name; `finding` opens its dialog.
    """

    status: str
    figures: tuple[str, ...]

    @property
    def note(self) -> str:
        if self.status == UNSUPPORTED:
            return "the cited text was not found in the source"
        return "not every figure was found in the source"

    @property
    def finding(self) -> str:
        if self.status == UNSUPPORTED:
            return "The cited text was not found in the source."
        return "Not every figure here was found in the source."


@dataclass(frozen=True, slots=True)
class Chip:
    """What a page shows for one citation (docs/pages.md).

    `kind` is the target kind, or `"fallback"` for a citation without a
    readable target. `href` is a site path or an http(s) URL (`external`),
    else None. `accounts` lists each account of an `accounts` chip.
    `cited_text` and `title` are shown on demand. `support` is set only when
    the citation is partly supported or unsupported (its mark and what its
    dialog says). Never holds a provider.
    """

    kind: str
    label: str
    href: str | None = None
    external: bool = False
    accounts: tuple[ChipLink, ...] = ()
    title: str = ""
    cited_text: str = ""
    support: ChipSupport | None = None

    @property
    def label_may_be_cut(self) -> bool:
        """Whether a narrow screen may cut the label short (pages.css: 11rem), so it gets a tooltip."""
        return len(self.label) > CHIP_LABEL_FITS


def safe_href(value: object) -> str | None:
    """`value` when it is an http/https URL a page may link to, else None."""
    if isinstance(value, str) and _SAFE_URL.match(value):
        return value
    return None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _host(url: str) -> str:
    """The host of an http(s) `url` as written (port and user info dropped), else `url`.

    By hand rather than `urlsplit`: the authority as written, never re-encoded.
    """
    authority = re.split(r"[/?#\\]", url[url.index("://") + 3 :], maxsplit=1)[0]
    host = authority[authority.rfind("@") + 1 :]
    host = host[: host.find("]") + 1] if host.startswith("[") else host.split(":")[0]
    return host or url


def readable_file_name(name: str) -> str:
    """A label for a library document known only by its file name: "ira-deadlines.md" -> "IRA deadlines".

    The extension goes, `-` and `_` become spaces, the first word is
    capitalised and a few finance abbreviations are written as people do
    (IRA, APR, 401(k), Roth). A name with nothing left comes back as it is.
    """
    words = re.split(r"[-_\s]+", _FILE_EXTENSION.sub("", name).strip("-_ "))
    words = [_WORDS.get(w.lower(), w) for w in words if w]
    if not words:
        return name
    first = words[0]
    words[0] = first[:1].upper() + first[1:]
    return " ".join(words)


def _library_title(source: str, title: str) -> str:
    """A library document's title, readable when it is missing or only a file name (from `source`'s path)."""
    if title and not _FILE_NAME.match(title):
        return title
    name = title or (source.rstrip("/").rsplit("/", 1)[-1] if _LIBRARY_SOURCE.match(source) else "")
    return readable_file_name(name) if name else title


def _fallback(source: str, title: str, cited_text: str) -> Chip:
    href = safe_href(source)
    title = _library_title(source, title) if _LIBRARY_SOURCE.match(source) else title
    label = title or (_host(source) if href else source) or "Source"
    return Chip("fallback", label, href, href is not None, title=title, cited_text=cited_text)


def _account_links(target: AccountsTarget, names: Mapping[str, str], title: str) -> tuple[ChipLink, ...]:
    count = len(target.accounts)
    labels = [
        names.get(ref.account_id) or f"{title or 'Account'} ({i} of {count})"
        for i, ref in enumerate(target.accounts, 1)
    ]
    # Two cards may share a name ("Credit card"): number repeats so each link reads apart.
    repeated = {label for label in labels if labels.count(label) > 1}
    seen: dict[str, int] = {}
    links = []
    for label, ref in zip(labels, target.accounts, strict=True):
        if label in repeated:
            seen[label] = seen.get(label, 0) + 1
            label = f"{label} ({seen[label]})"
        links.append(ChipLink(label, account_path(ref.account_id)))
    return tuple(links)


def _chip_support(entry: Mapping[str, object]) -> ChipSupport | None:
    """The flag of a partly supported or unsupported citation; None for any other (a missing or malformed
    `support` reads as unchecked: no flag, docs/support.md)."""
    support = read_support(entry.get("support"))
    if support is None or support.status not in (PARTLY_SUPPORTED, UNSUPPORTED):
        return None
    return ChipSupport(support.status, tuple(figure.text for figure in support.unmatched))


def chip_for_citation(citation: object, *, account_names: Mapping[str, str]) -> Chip:
    """The chip for one stored citation (docs/pages.md); never raises.

    `citation` is an entry of `citations`/`inline_citations` as stored (any
    JSON value). `account_names` maps the caller's account ids to their
    names; an `account` chip not in it shows the citation's title. Unknown,
    malformed and untyped targets give a `"fallback"` chip from `source` and
    `title` (an http/https source links). A partly supported or unsupported
    citation's chip carries its `support` (docs/support.md).
    """
    entry = citation if isinstance(citation, dict) else {}
    chip = _chip(entry, account_names)
    support = _chip_support(entry)
    return chip if support is None else replace(chip, support=support)


def _chip(entry: Mapping[str, object], account_names: Mapping[str, str]) -> Chip:
    source, title, cited = _text(entry.get("source")), _text(entry.get("title")), _text(entry.get("cited_text"))
    target = parse_citation_target(entry.get("target"))
    if isinstance(target, AccountTarget):
        label = account_names.get(target.account_id) or title or "Account"
        return Chip("account", label, account_path(target.account_id), title=title, cited_text=cited)
    if isinstance(target, AccountsTarget):
        links = _account_links(target, account_names, title)
        return Chip("accounts", f"{len(links)} accounts", accounts=links, title=title, cited_text=cited)
    if isinstance(target, PortfolioTarget):
        return Chip("portfolio", "Your portfolio", PORTFOLIO_PATH, title=title, cited_text=cited)
    if isinstance(target, MarketDataTarget):
        return Chip("market_data", target.ticker, title=title, cited_text=cited)
    if isinstance(target, AnalysisTarget):
        return Chip("analysis", "Live data" if source == FINNHUB_SOURCE else "Analysis", title=title, cited_text=cited)
    if isinstance(target, _LIBRARY):
        title = _library_title(source, title)
    if isinstance(target, (WebTarget, *_LIBRARY)):
        url = target.url
        href = safe_href(url)
        label = title or (_host(url) if href and url else "") or source or "Document"
        return Chip(target.kind, label, href, href is not None, title=title, cited_text=cited)
    return _fallback(source, title, cited)


@dataclass(frozen=True, slots=True)
class CitedSpan:
    """An inline citation's chip and span, `[start, end)` as indices into the answer `str`."""

    chip: Chip
    start: int
    end: int


def _offset(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def cited_spans(answer: str, inline: object, *, account_names: Mapping[str, str]) -> tuple[list[CitedSpan], list[Chip]]:
    """Each inline citation's chip and span (docs/turns.md#what-a-turn-stores), in stored order; never raises.

    `inline` is the stored `inline_citations` value; spans are UTF-16 code
    unit offsets, end exclusive, converted here to `str` indices. Returns
    the usable spans and the chips whose span is missing, not integers,
    reversed, out of range or splitting a character (shown after the text).
    """
    entries: Sequence[object] = inline if isinstance(inline, list) else []
    to_index = utf16_index(answer)
    spans: list[CitedSpan] = []
    stray: list[Chip] = []
    for entry in entries:
        chip = chip_for_citation(entry, account_names=account_names)
        start = _offset(entry.get("start")) if isinstance(entry, dict) else None
        end = _offset(entry.get("end")) if isinstance(entry, dict) else None
        begin = to_index(start) if start is not None else None
        finish = to_index(end) if end is not None else None
        if begin is None or finish is None or begin > finish:
            stray.append(chip)
            continue
        spans.append(CitedSpan(chip, begin, finish))
    return spans, stray
