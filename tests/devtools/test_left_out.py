"""The recorded model is a development app (docs/deploying.md#what-a-production-install-leaves-out).

A production install leaves `devtools/` out: no app imports it, and the
application starts and serves without it (a real subprocess whose import path
holds every top-level folder of the project but `devtools`).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ast_support import APPS as ALL_APPS

ROOT = Path(__file__).resolve().parents[2]
APPS = tuple(app for app in ALL_APPS if app != "devtools")


def test_no_app_imports_devtools():
    offenders = []
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "devtools"]
    assert offenders == []


_SCRIPT = """
import importlib.util, json, django
from django.conf import settings
assert importlib.util.find_spec("devtools") is None, "devtools is importable"
django.setup()
from django.core.management import call_command, get_commands
from django.test import Client
call_command("migrate", "--no-input", verbosity=0)
call_command("check")
import live.runner, live.views  # the live turn's code loads without the recorded model
response = Client().get("/healthz")
print(json.dumps({
    "installed": "devtools" in settings.INSTALLED_APPS,
    "serve_recorded_model": "serve_recorded_model" in get_commands(),
    "healthz": response.status_code,
}))
"""


@pytest.mark.parametrize("debug", ["false", "true"])
def test_the_application_starts_and_serves_without_devtools(tmp_path, debug):
    tree = tmp_path / "install"
    tree.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("devtools", ".git", ".venv", "var", "tests", "bench"):
            (tree / entry.name).symlink_to(entry)
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        "DJANGO_SETTINGS_MODULE": "silvia.settings",
        "DJANGO_DEBUG": debug,
        "DJANGO_SECRET_KEY": "devtools-test-key-never-used-to-serve-Qw8Er5Ty2Ui7Op4As1Df",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=tree, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = done.stdout.strip().splitlines()[-1]
    assert result == '{"installed": false, "serve_recorded_model": false, "healthz": 200}'


def test_the_test_settings_install_devtools():
    from django.conf import settings
    from django.core.management import get_commands

    assert "devtools" in settings.INSTALLED_APPS and get_commands()["serve_recorded_model"] == "devtools"
