"""The tools a live turn offers the model (SPEC sections 4, 8, 11, 13).

Each tool is one `ToolExecutor` (`chat.tools.base`); the turn runner asks
`configured_tools()` which ones are on, gives the model their definitions,
runs each `tool_use` through `run()` and turns the output into `search_result`
blocks with `citations.citable.to_citable_content`.
"""
