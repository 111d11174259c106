"""`python manage.py serve_recorded_model [--port 8765] [--scripts examples/recorded]`

Serves the recorded model (`devtools.recorded_model`): a local stand-in for
the Messages API that replays recorded streams. It is not Claude.
"""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from devtools.recorded_model import RecordedModelServer, ScriptError, load_scripts


class Command(BaseCommand):
    help = "Serve the RECORDED model (not Claude) on 127.0.0.1 for demos and tests; Ctrl-C stops it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8765)
        parser.add_argument("--scripts", type=Path, default=Path(settings.BASE_DIR) / "examples" / "recorded")

    def handle(self, *args, port: int, scripts: Path, **options) -> None:
        try:
            loaded = load_scripts(scripts)
        except ScriptError as error:
            raise CommandError(str(error)) from None
        try:
            server = RecordedModelServer(loaded, port=port).start()
        except OSError as error:
            raise CommandError(f"cannot listen on 127.0.0.1:{port}: {error.strerror}") from None
        self.stdout.write(f"RECORDED MODEL (not Claude): {len(loaded)} recorded stream(s) from {scripts}")
        self.stdout.write(f"Point the service at it: ANTHROPIC_BASE_URL={server.base_url}")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            server.stop()
