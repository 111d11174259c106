"""The live turns' two streaming endpoints, under /api/chat/ (docs/live.md)."""

from django.urls import re_path

from live.views import TurnCreateView, TurnEventsView

urlpatterns = [
    re_path(r"^sessions/(?P<session_id>[^/]+)/turns/?$", TurnCreateView.as_view(), name="turn-create"),
    re_path(r"^turns/(?P<turn_id>[^/]+)/events/?$", TurnEventsView.as_view(), name="turn-events"),
]
