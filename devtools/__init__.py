"""Development tools: the recorded model (a local stand-in for the Messages API).

Nothing in `chat`, `pages`, `finance` or `citations` imports this package: a
production install leaves it out (docs/deploying.md). `silvia/settings.py`
installs the app (its `serve_recorded_model` command) when DEBUG is on and
the package is present; the test settings always install it.
"""
