"""The sandbox's fixtures for the hostile-code tests, for every test under tests/tools/:
the real sandbox, once a module, and `execute_python` in it with small limits."""

from __future__ import annotations

import pytest

from tests.sandbox_support import MB, the_sandbox
from tools.python import ExecutePythonTool


@pytest.fixture(scope="module")
def sandbox():
    return the_sandbox()


@pytest.fixture
def tool(sandbox):
    return ExecutePythonTool(sandbox=sandbox, timeout_seconds=15.0, cpu_seconds=2, memory_bytes=256 * MB)
