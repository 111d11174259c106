"""URLs: readable pages for machine downloads (docs/citable.md) and account
page links (docs/privacy.md).

Percent-encoding follows JavaScript's `encodeURIComponent`, because the
clients that build and match these paths are JavaScript: everything but
ASCII letters, digits and `-_.!~*'()` is encoded from UTF-8.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, unquote, urlsplit

__all__ = [
    "account_id_candidates",
    "account_path",
    "encode_uri_component",
    "humanize_citation_url",
]

# The characters `encodeURIComponent` leaves alone besides letters and digits.
_URI_COMPONENT_SAFE = "-_.!~*'()"

_SCHEMES = frozenset({"http", "https"})

# `[0-9]`, not `\d`: `\d` also matches non-ASCII digits.
_ECFR_PATH = re.compile(
    r"/api/versioner/v1/full/(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2}|current)"
    r"/title-(?P<title>[0-9]+)\.xml"
)
_USCODE_PATH = re.compile(
    r"/download/releasepoints/us/pl/(?P<congress>[0-9]+)/(?P<point>[0-9]+(?:not[0-9]+)?)"
    r"/(?:xml|htm|xhtml|pdf)_usc(?P<title>[0-9]+[A-Za-z]?|All)"
    r"@(?P<congress2>[0-9]+)-(?P<point2>[0-9]+(?:not[0-9]+)?)\.zip"
)

# A `%` not followed by two hex digits: `decodeURIComponent` throws on it.
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def encode_uri_component(value: str) -> str:
    """`value` percent-encoded as JavaScript's `encodeURIComponent` does.

    Raises `TypeError` for a non-`str` and `UnicodeEncodeError` for a lone
    surrogate (JavaScript throws `URIError` there too).
    """
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {type(value).__name__}")
    return quote(value, safe=_URI_COMPONENT_SAFE)


def humanize_citation_url(url: str) -> str:
    """A page a person can read for a machine-download URL (docs/citable.md).

    - eCFR full-text XML
      (`http(s)://www.ecfr.gov/api/versioner/v1/full/<date>/title-<n>.xml?<query>`)
      becomes the eCFR reader page for that date, down to the `section`, or
      `part` (then `subpart`, else `appendix`) when given. Empty query values
      count as not given; the first non-empty value of a repeated one wins.
    - A US Code release-point ZIP becomes the title's reader page
      (`uscAll` becomes the browse page). The two congress numbers and the
      two release points in the URL must agree, else the URL is left alone.

    Scheme (`http`/`https`) and host are matched exactly as written in
    docs/citable.md. A fragment, and a query on a US Code ZIP, are ignored. Anything else
    comes back unchanged, byte for byte.

    Raises `TypeError` for a non-`str` `url` (a caller bug: tool outputs are
    type-checked before they get here).
    """
    if not isinstance(url, str):
        raise TypeError(f"humanize_citation_url expects str, got {type(url).__name__}")
    if "\t" in url or "\r" in url or "\n" in url:
        # urlsplit silently deletes these; a URL carrying them is not the
        # download URL as written, so it is left alone.
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced `[` in the host
        return url
    if parts.scheme not in _SCHEMES or not url.startswith(parts.scheme + "://"):
        # urlsplit lower-cases the scheme; docs/citable.md matches it as written.
        return url
    if parts.netloc == "www.ecfr.gov":
        return _humanize_ecfr(url, parts.path, parts.query)
    if parts.netloc == "uscode.house.gov":
        return _humanize_uscode(url, parts.path)
    return url


def _query_values(query: str) -> dict[str, str]:
    """First non-empty value of each query parameter (present-but-empty = absent)."""
    values: dict[str, str] = {}
    # keep_blank_values=False drops `part=` entirely, which is the rule.
    for key, value in parse_qsl(query):
        values.setdefault(key, value)
    return values


def _humanize_ecfr(url: str, path: str, query: str) -> str:
    match = _ECFR_PATH.fullmatch(path)
    if match is None:
        return url
    date, title = match["date"], match["title"]
    if date == "current":
        page = f"https://www.ecfr.gov/current/title-{title}"
    else:
        page = f"https://www.ecfr.gov/on/{date}/title-{title}"
    params = _query_values(query)
    if "section" in params:
        return f"{page}/section-{encode_uri_component(params['section'])}"
    if "part" in params:
        page = f"{page}/part-{encode_uri_component(params['part'])}"
        if "subpart" in params:
            return f"{page}/subpart-{encode_uri_component(params['subpart'])}"
        if "appendix" in params:
            return f"{page}/appendix-{encode_uri_component(params['appendix'])}"
    return page


def _humanize_uscode(url: str, path: str) -> str:
    match = _USCODE_PATH.fullmatch(path)
    if match is None:
        return url
    if match["congress"] != match["congress2"] or match["point"] != match["point2"]:
        return url
    title = match["title"]
    if title == "All":
        return "https://uscode.house.gov/browse.xhtml"
    digits = title.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    letter = title[len(digits) :]
    # lstrip, not int(): int() refuses more than 4300 digits.
    number = digits.lstrip("0") or "0"
    return f"https://uscode.house.gov/view.xhtml?path=/prelim@title{number}{letter}&edition=prelim"


def account_path(account_id: str) -> str:
    """The account page path: `/accounts/<encodeURIComponent(account_id)>` (docs/privacy.md).

    Raises `TypeError` for a non-`str`.
    """
    return "/accounts/" + encode_uri_component(account_id)


def account_id_candidates(segment: str) -> list[str]:
    """The account ids an `/accounts/<segment>` path segment may mean (docs/privacy.md).

    The segment as given, then its percent-decoding (as `decodeURIComponent`:
    `+` stays `+`), without repeats. A segment that `decodeURIComponent`
    would reject (a stray `%`, invalid UTF-8) yields only itself.
    Raises `TypeError` for a non-`str`.
    """
    if not isinstance(segment, str):
        raise TypeError(f"expected str, got {type(segment).__name__}")
    candidates = [segment]
    if "%" in segment and _BAD_PERCENT.search(segment) is None:
        try:
            decoded = unquote(segment, errors="strict")
        except UnicodeDecodeError:
            decoded = segment
        if decoded != segment:
            candidates.append(decoded)
    return candidates
