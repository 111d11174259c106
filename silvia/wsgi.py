"""WSGI entry point (the Procfile's `web:`, one import per gunicorn process)."""

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "silvia.settings")
application = get_wsgi_application()

from silvia.celery import app as celery_app  # noqa: E402, F401  (turns are queued through it)

# What the process loaded to start is kept for its life: out of the cyclic collector's full passes
# (docs/deploying.md#the-heap-a-process-starts-with).
gc.freeze()
