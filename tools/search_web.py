"""`search_web`: an Exa-compatible web search (docs/citable.md, issue 8 item 4).

`POST <base_url>/search` with `x-api-key`, body `{"query", "numResults",
"contents": {"text": {"maxCharacters"}}}`; the answer's `results` become
`{"results": [{"url", "title", "text"}, ...]}`, each field a `str` or `None`,
which `citations.citable.to_citable_content("search_web", ...)` reads.

Its connections go through the egress allowlist (`tools.egress_http`),
the same one the `execute_python` sandbox's proxy serves: the base URL's host
is on it when `EXA_API_KEY` is set, and a name resolving to a private address
is refused (docs/sandbox.md#network).

Every failure (refused key, rate limit, 5xx, timeout, unreachable host, an
answer that is not Exa's JSON, too large) is a `ToolError` whose reason names
the kind of failure only: never the key, the base URL or the query, which may
hold what the user typed.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from citations.citable import SEARCH_WEB
from citations.tools import ToolError
from tools.egress import EgressAllowlist, EgressRefused, egress_allowlist, url_host
from tools.egress_http import allowlist_transport

logger = logging.getLogger(__name__)

NAME = SEARCH_WEB.name
MAX_QUERY_CHARS = 2_000
# Exa's text is long; the model needs a passage, and each text is sent back to
# it as a search_result block, so it is capped per result.
MAX_TEXT_CHARS = 4_000
# An answer this big is not a search answer (numResults <= 25 x 4,000 chars).
MAX_ANSWER_BYTES = 2_000_000


@dataclass(frozen=True)
class SearchWebTool:
    """The `search_web` executor (`citations.tools.ToolExecutor`).

    `api_key`: Exa's key (sent as `x-api-key`). `base_url`: e.g.
    `https://api.exa.ai` (`/search` is appended). `timeout_seconds`: the
    whole call's deadline (connect, send, every read). `max_results`: 1 to
    25, the `numResults` asked for and the most results returned.
    `allowlist`: where it may connect (the service's egress allowlist);
    None allows the base URL's host only.
    """

    api_key: str
    base_url: str = "https://api.exa.ai"
    timeout_seconds: float = 15.0
    max_results: int = 5
    allowlist: EgressAllowlist | None = None
    name: str = NAME

    def __post_init__(self) -> None:
        if not self.api_key.strip():
            raise ValueError("EXA_API_KEY is empty")
        if not self.base_url.lower().startswith(("http://", "https://")):
            raise ValueError("EXA_BASE_URL must start with http:// or https://")
        if not 0 < self.timeout_seconds <= 300:
            raise ValueError("SEARCH_WEB_TIMEOUT_SECONDS must be more than 0 and at most 300")
        if not 1 <= self.max_results <= 25:
            raise ValueError("SEARCH_WEB_MAX_RESULTS must be 1 to 25")

    def __repr__(self) -> str:
        # The dataclass repr would print the key.
        return f"SearchWebTool(base_url={self.base_url!r}, max_results={self.max_results})"

    def definition(self) -> dict[str, Any]:
        """The Messages API tool definition (`name`, `description`, `input_schema`)."""
        return SEARCH_WEB.definition(
            "Search the public web. Returns up to "
            f"{self.max_results} results, each with url, title and text (an extract of the page). "
            "Use it for current facts the other tools do not hold; cite the results you use."
        )

    def run(self, tool_input: dict[str, Any], *, user: Any) -> dict[str, Any]:
        """Search for `tool_input["query"]`; `{"results": [{"url", "title", "text"}, ...]}`.

        At most `max_results` results, `text` at most 4,000 characters.
        Raises `ToolError` for a bad input or any failure of the service.
        """
        query = _query_from(tool_input)
        answer = self._post(
            {"query": query, "numResults": self.max_results, "contents": {"text": {"maxCharacters": MAX_TEXT_CHARS}}}
        )
        return {"results": results_from_answer(answer, limit=self.max_results)}

    def _post(self, body: dict[str, Any]) -> object:
        url = self.base_url.rstrip("/") + "/search"
        headers = {"x-api-key": self.api_key, "content-type": "application/json", "accept": "application/json"}
        deadline = time.monotonic() + self.timeout_seconds
        own_host = url_host(self.base_url)
        allowlist = self.allowlist or EgressAllowlist(hosts=frozenset({own_host} if own_host else ()))
        try:
            with (
                httpx.Client(
                    timeout=self.timeout_seconds,
                    follow_redirects=False,
                    trust_env=False,
                    transport=allowlist_transport(allowlist),
                ) as client,
                client.stream("POST", url, json=body, headers=headers) as response,
            ):
                _check_status(response.status_code)
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > MAX_ANSWER_BYTES:
                        raise ToolError("web search failed: the answer was too large")
                    if time.monotonic() > deadline:
                        raise httpx.ReadTimeout("deadline")
        except httpx.TimeoutException:
            logger.warning("search_web: timed out after %s s", self.timeout_seconds)
            raise ToolError(f"web search timed out after {self.timeout_seconds:g} s") from None
        except EgressRefused as refused:
            logger.warning("search_web: refused by the egress allowlist (%s)", refused.reason)
            raise ToolError(f"web search is unreachable ({refused.reason})") from None
        except httpx.HTTPError as exc:
            # The exception text can carry the URL: only its class is logged.
            logger.warning("search_web: request failed (%s)", type(exc).__name__)
            raise ToolError("web search is unreachable") from None
        try:
            return json.loads(bytes(data))
        except ValueError:
            logger.warning("search_web: answer is not JSON")
            raise ToolError("web search failed: the answer was not valid JSON") from None


def _query_from(tool_input: object) -> str:
    query = tool_input.get("query") if isinstance(tool_input, dict) else None
    if not isinstance(query, str) or not query.strip():
        raise ToolError("input.query must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise ToolError(f"input.query is longer than {MAX_QUERY_CHARS} characters")
    return query.strip()


def _check_status(status: int) -> None:
    if 200 <= status < 300:
        return
    logger.warning("search_web: HTTP %s", status)
    if status in (401, 403):
        raise ToolError(f"web search refused the API key (HTTP {status})")
    if status == 429:
        raise ToolError("web search is rate limited (HTTP 429); try again later")
    if status >= 500:
        raise ToolError(f"web search service error (HTTP {status})")
    raise ToolError(f"web search failed (HTTP {status})")


def results_from_answer(answer: object, *, limit: int) -> list[dict[str, str | None]]:
    """The first `limit` results of an Exa `/search` answer as `{"url", "title", "text"}`.

    A field that is not a non-blank string is `None`; `text` falls back to
    the result's `highlights` (joined by blank lines), then its `summary`,
    and is cut to 4,000 characters. Items that are not objects are skipped.
    NUL characters become U+FFFD (PostgreSQL cannot store them).
    Raises `ToolError` when `answer` is not an object with a `results` list.
    """
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list):
        raise ToolError("web search failed: the answer had no list of results")
    out: list[dict[str, str | None]] = []
    for item in results:
        if len(out) >= limit:
            break
        if not isinstance(item, dict):
            continue
        text = _text(item.get("text"))
        if text is None and isinstance(item.get("highlights"), list):
            text = _text("\n\n".join(h for h in item["highlights"] if isinstance(h, str)))
        if text is None:
            text = _text(item.get("summary"))
        out.append(
            {"url": _text(item.get("url")), "title": _text(item.get("title")), "text": text and text[:MAX_TEXT_CHARS]}
        )
    return out


def _text(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip().replace("\x00", "\ufffd")


def search_web_tool() -> SearchWebTool | None:
    """The tool from settings (`EXA_API_KEY`, `EXA_BASE_URL`, `SEARCH_WEB_TIMEOUT_SECONDS`,
    `SEARCH_WEB_MAX_RESULTS`); `None` when `EXA_API_KEY` is unset or blank (the tool is not offered).

    Raises `ImproperlyConfigured` naming the variable when a value is out of range.
    """
    key = getattr(settings, "EXA_API_KEY", "") or ""
    if not key.strip():
        return None
    try:
        return SearchWebTool(
            api_key=key.strip(),
            base_url=settings.EXA_BASE_URL,
            timeout_seconds=settings.SEARCH_WEB_TIMEOUT_SECONDS,
            max_results=settings.SEARCH_WEB_MAX_RESULTS,
            allowlist=egress_allowlist(),
        )
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None
