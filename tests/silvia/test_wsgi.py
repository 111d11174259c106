"""`silvia.wsgi`, the Procfile's `web:` entry point (docs/deploying.md#processes-the-procfile)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.uvicorn_server import ROOT


def heap_after_import(module: str) -> dict[str, int]:
    """In a fresh process: the objects the cyclic collector tracked just before `module` was imported, how
    many it froze (`gc.get_freeze_count()`), and how many it still tracks right after the import."""
    code = (
        "import gc, json, django; django.setup(); before = len(gc.get_objects()); "
        f"import {module}; "
        "print(json.dumps({'before': before, 'frozen': gc.get_freeze_count(), 'tracked': len(gc.get_objects())}))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "silvia.settings_test"}
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_heap_loaded_at_start_is_left_out_of_the_collector():
    """docs/deploying.md#the-heap-a-process-starts-with: everything loaded by the import, and before it, is
    frozen; the collector is left with none of it."""
    heap = heap_after_import("silvia.wsgi")
    assert heap["frozen"] > heap["before"] > 10_000
    assert heap["tracked"] < 100
