"""Each tool declared once (citations.citable.ToolSpec, listed in citations.citable.TOOL_SPECS): the code, the
prompt and the docs read it or are held to it here (docs/tools.md#one-spec-per-tool)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.utils.module_loading import import_string

from citations.citable import (
    EXECUTE_PYTHON,
    EXECUTE_SQL,
    LIBRARIES,
    LIBRARY_SPECS,
    SEARCH_WEB,
    TOOL_SPECS,
    ToolSpec,
    to_citable_content,
    tool_spec,
)
from citations.corpus import CORPUS_FOLDERS
from citations.tools import ToolExecutor
from citations.turn import TurnRecordError
from finance.sql_tool import ExecuteSqlTool
from live.prompts import LEGACY, V5, system_prompt
from tests.ast_support import APPS as ALL_APPS
from tools import registry
from tools.library import library_readers
from tools.python import ExecutePythonTool
from tools.sandbox import Sandbox
from tools.search_web import SearchWebTool

ROOT = Path(__file__).resolve().parents[2]
APPS = ALL_APPS

#: SPEC section 4's tools, in its order.
SECTION_4 = [
    "execute_sql",
    "execute_python",
    "read_tax_authority",
    "read_credit_card_document",
    "read_mortgage_authority",
    "search_web",
]


def test_the_registry_lists_section_4_tools_once_each():
    assert list(TOOL_SPECS) == SECTION_4
    assert [spec.name for spec in TOOL_SPECS.values()] == SECTION_4
    assert list(TOOL_SPECS.values()) == [EXECUTE_SQL, EXECUTE_PYTHON, *LIBRARY_SPECS, SEARCH_WEB]
    assert tool_spec("execute_sql") is EXECUTE_SQL
    assert tool_spec("read_anything") is None and tool_spec(None) is None


def test_a_tool_name_is_spelled_once_in_the_code():
    """Outside its spec's declaration, code names a tool through the spec: no other string constant is a tool name
    (docstrings, comments, messages and sources that contain a name are not names)."""
    spelled: dict[str, list[str]] = {name: [] for name in TOOL_SPECS}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in spelled:
                    spelled[node.value].append(path.relative_to(ROOT).as_posix())
    assert spelled == {
        "execute_sql": ["citations/citable/sql.py"],
        "execute_python": ["citations/citable/python.py"],
        **{library.tool: ["citations/citable/library.py"] for library in LIBRARIES},
        "search_web": ["citations/citable/web.py"],
    }


def test_the_tool_protocol_is_pure():
    """citations/tools.py sits below both apps and imports the standard library only."""
    tree = ast.parse((ROOT / "citations" / "tools.py").read_text(encoding="utf-8"))
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported == {"__future__", "typing"}


# --- what the model is shown ----------------------------------------------------


def _executors(settings, tmp_path) -> list[ToolExecutor]:
    settings.CITATION_CORPUS_ROOT = str(tmp_path)
    return [
        ExecuteSqlTool(),
        ExecutePythonTool(sandbox=Sandbox(bwrap="/usr/bin/bwrap", interpreter="/usr/bin/python3")),
        *library_readers(),
        SearchWebTool(api_key="test-key"),
    ]


def test_every_executor_defines_its_tool_from_its_spec(settings, tmp_path):
    executors = _executors(settings, tmp_path)
    assert [executor.name for executor in executors] == SECTION_4
    for executor in executors:
        assert isinstance(executor, ToolExecutor)
        spec = TOOL_SPECS[executor.name]
        definition = executor.definition()
        assert list(definition) == ["name", "description", "input_schema"]
        assert definition["name"] == spec.name
        assert definition["input_schema"] == spec.input_schema
        assert isinstance(definition["description"], str) and definition["description"].strip()


def test_a_definition_is_a_copy_of_the_schema():
    definition = EXECUTE_SQL.definition("d")
    definition["input_schema"]["properties"]["query"]["type"] = "integer"
    assert EXECUTE_SQL.input_schema["properties"]["query"]["type"] == "string"


def test_the_library_readers_describe_their_own_folder(settings, tmp_path):
    readers = {reader.name: reader.definition()["description"] for reader in _executors(settings, tmp_path)[2:5]}
    assert readers == {
        "read_tax_authority": "Read one document of the tax library (IRS publications, US Code, eCFR) by its path. "
        "Paths are relative to the tax-authority/ library.",
        "read_credit_card_document": "Read one credit card's terms document by its path (issuer/card/file). "
        "Paths are relative to the credit-card-corpus/ library.",
        "read_mortgage_authority": "Read one mortgage regulation or note (Regulation Z, US Code) by its path. "
        "Paths are relative to the mortgage-code/ library.",
    }
    assert CORPUS_FOLDERS == {
        "read_tax_authority": "tax-authority",
        "read_credit_card_document": "credit-card-corpus",
        "read_mortgage_authority": "mortgage-code",
    }


def _table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of each row of the Markdown table under `header` (its first line), separator row left out."""
    table = text.split(header, 1)[1].split("\n\n", 1)[0]
    return [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in table.strip().splitlines()[1:]]


def test_the_v5_prompt_has_one_citation_row_per_spec():
    rows = _table_rows(V5, "| tool | the sources it writes |")
    assert rows == [[spec.name, spec.prompt_sources] for spec in TOOL_SPECS.values()]
    assert system_prompt("v5") == V5


def test_the_v5_rows_name_the_sources_the_rules_write():
    """Hand-written from docs/citable.md: the prompt tells the model the sources the block rules really write."""
    assert {spec.name: spec.prompt_sources for spec in TOOL_SPECS.values()} == {
        "execute_sql": "silvia://your-account/<account> for rows of one account; "
        "silvia://your-portfolio for rows not tied to one account",
        "execute_python": "silvia://market-data/finnhub/<TICKER> for a ticker's market data; "
        "silvia://market-data/finnhub for other live data; silvia://analysis for computed results",
        "read_tax_authority": "the publication's page (irs.gov, ecfr.gov, uscode.house.gov), "
        "else silvia://tax-authority/<path>",
        "read_credit_card_document": "the issuer's terms page, else silvia://credit-card-corpus/<path>",
        "read_mortgage_authority": "the regulation's page, else silvia://mortgage-code/<path>",
        "search_web": "the page's URL",
    }
    [portfolio] = to_citable_content("execute_sql", {}, {"rows": []})
    [account] = to_citable_content("execute_sql", {}, {"rows": [{"account_name": "Checking", "balance": 1}]})
    [ticker] = to_citable_content("execute_python", {"code": "import finnhub"}, {"stdout": '{"symbol": "aapl"}'})
    [reading] = to_citable_content("read_mortgage_authority", {"path": "reg-z.md"}, {"content": "Text"})
    assert [portfolio.source, account.source, ticker.source, reading.source] == [
        "silvia://your-portfolio",
        "silvia://your-account/checking",
        "silvia://market-data/finnhub/AAPL",
        "silvia://mortgage-code/reg-z.md",
    ]


#: The legacy prompt is frozen history (turns stored under it were answered with this text): byte for byte.
LEGACY_TEXT = (
    "You are Silvia, a personal finance assistant. You answer the user's questions about their own accounts, "
    "holdings, taxes, credit cards and mortgages, using the tools you are given. Be concise and concrete. Never "
    "invent numbers: every figure comes from a tool result, and you cite the result it comes from. Do not name "
    "data vendors or internal systems in your answer."
)


def test_the_legacy_prompt_is_frozen():
    assert LEGACY == LEGACY_TEXT
    assert system_prompt("legacy") == LEGACY_TEXT
    assert "silvia://" not in LEGACY and "| tool |" not in LEGACY


# --- the docs -----------------------------------------------------------------------


def _input_shape(spec: ToolSpec) -> str:
    """The input schema as the docs write it: `{"query": str}`."""
    schema = spec.input_schema
    assert schema["type"] == "object" and schema["required"] == list(schema["properties"])
    types = {"string": "str"}
    return "{" + ", ".join(f'"{key}": {types[value["type"]]}' for key, value in schema["properties"].items()) + "}"


def test_docs_tools_table_lists_every_tool_its_input_and_a_real_factory():
    rows = _table_rows((ROOT / "docs" / "tools.md").read_text(encoding="utf-8"), "| tool | input | factory | on when |")
    assert [row[0] for row in rows] == [f"`{name}`" for name in TOOL_SPECS]
    for (name, given, factory, _on_when), spec in zip(rows, TOOL_SPECS.values(), strict=True):
        assert given == f"`{_input_shape(spec)}`", name
        path = re.match(r"`([\w.]+)\(\)`", factory)
        assert path is not None, f"{name}: no factory in {factory!r}"
        function = import_string(path.group(1))
        # The factory is one configured_tools() calls: the registry module holds that very function.
        assert getattr(registry, function.__name__) is function, name


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_docs_citable_gives_each_tool_its_input():
    sections = _sections((ROOT / "docs" / "citable.md").read_text(encoding="utf-8"))
    documented = {name: sections[name] for name in TOOL_SPECS if name in sections}
    documented |= {library.tool: sections["Library documents"] for library in LIBRARIES}
    assert set(documented) == set(TOOL_SPECS)
    for name, section in documented.items():
        given = re.search(r"Input\s+`(\{[^`]*\})`", section)
        assert given is not None and given.group(1) == _input_shape(TOOL_SPECS[name]), name


def test_docs_citable_library_table_follows_the_libraries():
    section = _sections((ROOT / "docs" / "citable.md").read_text(encoding="utf-8"))["Library documents"]
    rows = _table_rows(section, "| tool | kind | source without a URL |")
    assert rows == [[f"`{lib.tool}`", f"`{lib.kind.kind}`", f"`{lib.source_prefix}<path>`"] for lib in LIBRARIES]


def test_docs_tools_sections_give_the_same_input():
    sections = _sections((ROOT / "docs" / "tools.md").read_text(encoding="utf-8"))
    for name in ("search_web", "execute_python"):
        given = re.search(r"Input\s+`(\{[^`]*\})`", sections[f"`{name}`"])
        assert given is not None and given.group(1) == _input_shape(TOOL_SPECS[name]), name


# --- the output check ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "path", "message"),
    [
        ("execute_sql", "events[4].output.rows", "expected a list, got null"),
        ("execute_python", "events[4].output.stdout", "expected a string, got null"),
        ("read_tax_authority", "events[4].input.path", "expected a string (no output.path), got null"),
        ("read_credit_card_document", "events[4].input.path", "expected a string (no output.path), got null"),
        ("read_mortgage_authority", "events[4].input.path", "expected a string (no output.path), got null"),
        ("search_web", "events[4].output.results", "expected a list, got null"),
    ],
)
def test_each_spec_checks_its_main_output_field(name, path, message):
    with pytest.raises(TurnRecordError) as refused:
        TOOL_SPECS[name].check_output({}, {}, "events[4].output")
    assert (refused.value.path, refused.value.message) == (path, message)
