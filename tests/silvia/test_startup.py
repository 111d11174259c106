"""Start-up imports nothing only a turn or a tool needs (issue 21, item 2; docs/decisions.md).

Each check runs in a fresh interpreter, as `manage.py` and the servers do, and
reads `sys.modules` afterwards. The figures (`manage.py check` against a bare
project, `import_turns` of one record) are `bench/startup.py`'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Packages and our modules loaded on demand: by a live turn, a tool call, a metric or a page showing an answer.
LOADED_ON_DEMAND = (
    "anthropic",  # the SDK: about 3 s of CPU to import
    "pglast",  # the execute_sql guard's parser
    "httpx",  # the SDK's and search_web's HTTP client
    "pydantic",  # the SDK's types
    "prometheus_client",  # metrics: imported by what records or serves them
    # Traces (docs/metrics.md#traces): the API with the SDK and its exporter (and its protobuf), loaded only
    # by a process whose start found an OTLP endpoint (silvia/celery.py), or with the SDK by a turn.
    "opentelemetry",
    "google.protobuf",
    "live.runner",
    "live.errors",
    "tools.registry",
    "tools.python",
    "tools.search_web",
    "finance.sql_tool",
    "finance.sql_guard",
    "finance.sql_postgres",
    "finance.sql_sqlite",
    # Only a page that shows an answer: Markdown and the sanitizer (docs/pages.md).
    "markdown_it",
    "nh3",
    "pages.markdown",
)

PROBE = """
import json, sys
import django
django.setup()
if sys.argv[1] == "check":
    from django.core.management import call_command
    call_command("check", verbosity=0)
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(step: str) -> set[str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "silvia.settings",
        "DJANGO_SECRET_KEY": "startup-test-key-never-used-to-serve-4Jd8Kq2Lm6Np0Rs3Tv7Wx9Yz",
        "PYTHONPATH": str(ROOT),
    }
    result = subprocess.run(
        [sys.executable, "-c", PROBE, step], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


def _loaded(modules: set[str], name: str) -> bool:
    return name in modules or any(module.startswith(name + ".") for module in modules)


@pytest.mark.parametrize("step", ["setup", "check"])
def test_start_up_imports_nothing_only_a_turn_or_a_tool_needs(step):
    # `check` also imports the URLconf, so every view module: what a server imports on its first request.
    modules = _modules_after(step)
    assert "chat.models" in modules and "finance.models" in modules  # the apps did load
    if step == "check":
        assert "live.views" in modules  # the views were imported, and they stay light
    assert [name for name in LOADED_ON_DEMAND if _loaded(modules, name)] == []
