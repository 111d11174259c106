"""The tools a live turn offers the model (docs/citable.md, docs/live.md, docs/sql-tool.md).

Each tool is one `ToolExecutor` (`chat.tools.base`); the turn runner asks
`configured_tools()` which ones are on, gives the model their definitions,
runs each `tool_use` through `run()` and turns the output into `search_result`
blocks with `citations.citable.to_citable_content`.
"""
