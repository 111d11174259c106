"""Settings for the test suite: `silvia.settings` with a test-only secret key.

The tests run with DEBUG off, as production does, so `silvia.settings` needs a
key. It is put in the environment (not only in settings) so that a server or
command a test starts as a subprocess starts too. Never use this module to serve.
"""

import os

os.environ.setdefault("DJANGO_SECRET_KEY", "test-only-key-never-used-to-serve-7Hq2mZ9vR4xK8pW3nL6tB1cY5fJ0sD")

from silvia import settings as _base
from silvia.settings import *  # noqa: F403

# The tests run the recorded model (devtools/) whatever DEBUG says.
if "devtools" not in _base.INSTALLED_APPS:
    INSTALLED_APPS = [*_base.INSTALLED_APPS, "devtools"]

# The manifest (hashed names) exists only after `collectstatic`; the suite
# renders admin pages without running it. tests/silvia/test_settings_deploy.py checks the
# production storage through a real collectstatic and uvicorn.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Serve static files from the apps' folders, as with DEBUG on: no collectstatic needed.
WHITENOISE_AUTOREFRESH = True
WHITENOISE_USE_FINDERS = True

# The suite's in-process worker sweeps no turn on a timer (docs/job-engine.md#the-workers-sweep): a test that
# backdates turns, or holds a turn's row, would race it. A test of the sweep gives its worker processes
# LIVE_TURN_SWEEP_SECONDS (tests/live/test_sweeps.py); the start's sweep still runs.
LIVE_TURN_SWEEP_SECONDS = float(os.environ.get("LIVE_TURN_SWEEP_SECONDS", "0"))
RETENTION_PASS_SECONDS = float(os.environ.get("RETENTION_PASS_SECONDS", "0"))
