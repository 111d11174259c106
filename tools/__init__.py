"""The tools a live turn offers the model (docs/citable.md, docs/live.md, docs/sql-tool.md).

Each tool is declared once, by its `citations.citable.ToolSpec` (listed in
`citations.citable.TOOL_SPECS`), and run by one `citations.tools.ToolExecutor`;
the turn runner asks `configured_tools()` which ones are on, gives the model
their definitions, runs each `tool_use` through `run()` and turns the output
into `search_result` blocks with the spec's rule
(`citations.citable.to_citable_content`).
"""
