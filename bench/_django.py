"""The settings a benchmark's own process uses: the project's, with a key made for benchmarks.

A bench runs with DEBUG off, as a server does, and the settings then refuse to start without
`DJANGO_SECRET_KEY` (docs/configuration.md); `make bench` exports one, and `use_bench_settings` gives a
script run on its own (`.venv/bin/python bench/admin.py`, as bench/README.md shows) the same one.
"""

from __future__ import annotations

import os

#: Signs nothing anyone keeps: the scratch databases and servers of a run go with it.
BENCH_SECRET_KEY = "bench-only-key-never-used-to-serve-Qm4Rt7Wx2Zp9Lk5Vn8Bc3Hd6Jf1Sg0"


def use_bench_settings() -> None:
    """`DJANGO_SETTINGS_MODULE` and `DJANGO_SECRET_KEY` for this process, unless the caller set them."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "silvia.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", BENCH_SECRET_KEY)
