from django.urls import path, re_path

from chat.api.live_views import TurnCreateView, TurnEventsView
from chat.api.views import SessionDetailView, SessionListView

urlpatterns = [
    path("sessions/", SessionListView.as_view(), name="session-list"),
    re_path(r"^sessions/(?P<session_id>[^/]+)/turns/?$", TurnCreateView.as_view(), name="turn-create"),
    re_path(r"^turns/(?P<turn_id>[^/]+)/events/?$", TurnEventsView.as_view(), name="turn-events"),
    # With or without the trailing slash (SPEC section 10); any segment reaches
    # the view so a malformed id is the same 404 as a missing one.
    re_path(r"^sessions/(?P<session_id>[^/]+)/?$", SessionDetailView.as_view(), name="session-detail"),
]
