from django.urls import path, re_path

from chat.api.views import SessionDetailView, SessionExportView, SessionListView

urlpatterns = [
    path("sessions/", SessionListView.as_view(), name="session-list"),
    # With or without the trailing slash (docs/api.md); any segment reaches
    # the view so a malformed id is the same 404 as a missing one.
    re_path(r"^sessions/(?P<session_id>[^/]+)/export/?$", SessionExportView.as_view(), name="session-export"),
    re_path(r"^sessions/(?P<session_id>[^/]+)/?$", SessionDetailView.as_view(), name="session-detail"),
]
