"""ASGI entry point: `uvicorn silvia.asgi:application` (SSE streams without buffering).

Static files (the admin's, the pages') are served by whitenoise's middleware,
with DEBUG on or off, so no static handler wraps the application here.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "silvia.settings")
application = get_asgi_application()

from chat.live.configured import warn_if_no_model  # noqa: E402  (after Django is set up)

warn_if_no_model()
