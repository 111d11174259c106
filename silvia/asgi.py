"""ASGI entry point: `uvicorn silvia.asgi:application` (SSE streams without buffering)."""

import os

from django.conf import settings
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "silvia.settings")
application = get_asgi_application()

if settings.DEBUG:
    # What runserver does for the local demo: serve the admin's CSS and JS.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    application = ASGIStaticFilesHandler(application)
