"""System prompts of live turns: `v5` (with the citation table) and `legacy` (docs/live.md and docs/sql-tool.md).

The v5 citation table has one row per tool, generated from the tools' specs
(`citations.citable.TOOL_SPECS`: name and `prompt_sources`), so a tool is
described to the model where it is declared. The legacy prompt is frozen
history: `tests/tools/test_tool_specs.py` pins its text byte for byte.
"""

from __future__ import annotations

from citations.citable import TOOL_SPECS

__all__ = ["system_prompt"]

_BASE = """You are Silvia, a personal finance assistant. You answer the user's questions about their own \
accounts, holdings, taxes, credit cards and mortgages, using the tools you are given. Be concise and \
concrete. Never invent numbers: every figure comes from a tool result, and you cite the result it \
comes from. Do not name data vendors or internal systems in your answer."""

_TOOL_ROWS = "\n".join(f"| {spec.name} | {spec.prompt_sources} |" for spec in TOOL_SPECS.values())

_CITATION_TABLE = f"""

## Citations

Tool results come back as search results, each known by its source. Cite the search result a sentence \
relies on; never cite a source you did not receive in this conversation's tool results.

| tool | the sources it writes |
| --- | --- |
{_TOOL_ROWS}

When you read the account views (account_details, holding_details, public_holding_details) per account, \
always select the `source` and `source_account_id` columns alongside the account's name columns, so each \
citation of an account points at that exact account."""

V5 = _BASE + _CITATION_TABLE
LEGACY = _BASE


def system_prompt(prompt_version: str) -> str:
    """The system prompt text for `prompt_version` (`"v5"` or `"legacy"`); `KeyError` for any other."""
    return {"v5": V5, "legacy": LEGACY}[prompt_version]
