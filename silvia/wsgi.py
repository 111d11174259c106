"""WSGI entry point."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "silvia.settings")
application = get_wsgi_application()

from silvia.celery import app as celery_app  # noqa: E402, F401  (turns are queued through it)
