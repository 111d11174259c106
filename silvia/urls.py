from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/chat/", include("chat.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
]

# A URL no pattern matches under /api/ (`sessions//x/`, `sessions/%2F/`) gets
# the API's JSON 404, the same body as a missing session (SPEC section 10).
handler404 = "silvia.views.not_found"
