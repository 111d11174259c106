from django.contrib import admin
from django.urls import include, path, re_path

from pages.urls import auth_urlpatterns
from silvia.views import SchemaView, api_not_found, healthz, metrics, readyz

# Under /api/ every error is JSON (silvia/views.py, docs/api.md#errors).
handler400 = "silvia.views.bad_request"
handler403 = "silvia.views.permission_denied"
handler500 = "silvia.views.server_error"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/chat/", include("live.urls")),  # the live turns' streams (docs/live.md)
    path("api/chat/", include("chat.api.urls")),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    # Anything else under /api/ (`sessions//x/`, `sessions/%2F/`) is the API's
    # JSON 404, the same body as a missing session (docs/api.md), with
    # DEBUG on too (Django's handler404 is skipped then).
    re_path(r"^api/", api_not_found),
    *auth_urlpatterns,
    path("", include("pages.urls")),
]
