"""The API's JSON parser: DRF's, with a body nested too deep for Python's decoder a 400, not a 500."""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """`rest_framework.parsers.JSONParser`; a body nested past the decoder's recursion limit is a `ParseError` (400)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deep") from None
