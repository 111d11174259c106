"""Markdown answers for the pages' tests (docs/pages.md#citations-in-markdown).

`overview_answer` is the answer of the recorded stream
examples/recorded/30-markdown-overview.json as a stored turn holds it: the
texts of its final step joined, each cited block's span in UTF-16 code
units. The same answer streams in the browser tests through the recorded
model, so a stored row and a live turn show the same thing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from citations.utf16 import utf16_length

ROOT = Path(__file__).resolve().parent.parent
OVERVIEW_SCRIPT = ROOT / "examples" / "recorded" / "30-markdown-overview.json"
CARDS_SOURCE = "silvia://your-account/credit-card"
IRS_URL = "https://www.irs.gov/newsroom/401k-limit-increases-to-24500-for-2026-ira-limit-increases-to-7500"
DEADLINES_SOURCE = "silvia://tax-authority/irs/notes/ira-deadlines.md"


def overview_blocks() -> list[dict[str, Any]]:
    """The text blocks of the recorded overview's final step."""
    steps = json.loads(OVERVIEW_SCRIPT.read_text())["steps"]
    return [b for b in steps[-1]["message"]["content"] if b["type"] == "text"]


def overview_answer(targets: Mapping[str, Mapping[str, object]]) -> tuple[str, list[dict[str, Any]]]:
    """`(answer, inline_citations)`; `targets` maps a source to the target its citations carry."""
    answer, inline = "", []
    for block in overview_blocks():
        start = utf16_length(answer)
        answer += block["text"]
        for citation in block.get("citations", []):
            entry = {key: citation[key] for key in ("source", "title", "cited_text")}
            entry.update(start=start, end=utf16_length(answer))
            if citation["source"] in targets:
                entry["target"] = targets[citation["source"]]
            inline.append(entry)
    return answer, inline
