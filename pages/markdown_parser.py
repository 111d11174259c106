"""The Markdown dialect of answers: one configuration for rendering and for streaming (docs/pages.md).

CommonMark plus GFM tables and strikethrough (markdown-it-py, the Python port
of markdown-it), raw HTML off (an answer's `<tag>` is text), no linkify and
no typographer (what the model wrote is what shows), links only to http(s)
URLs (anything else stays text).
"""

from __future__ import annotations

from markdown_it import MarkdownIt

from pages.presenters import safe_href

__all__ = ["markdown_parser"]


def _http_only(url: str) -> bool:
    return safe_href(url) is not None


def markdown_parser() -> MarkdownIt:
    """A new parser of the answers' dialect (callers add their own rules to theirs)."""
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    parser.enable(["table", "strikethrough"])
    parser.validateLink = _http_only  # type: ignore[method-assign]  # markdown-it's documented hook
    return parser
