"""The live turns' endpoints under /api/chat/ (docs/live.md): the two streams, stopping a turn, and the session
detail with DELETE (which stops and deletes the session's live turns too, so `live` serves it, ahead of
`chat.api.urls`, whose GET it keeps)."""

from django.urls import re_path

from live.control_views import SessionView, TurnStopView
from live.views import TurnCreateView, TurnEventsView

urlpatterns = [
    re_path(r"^sessions/(?P<session_id>[^/]+)/turns/?$", TurnCreateView.as_view(), name="turn-create"),
    re_path(r"^turns/(?P<turn_id>[^/]+)/events/?$", TurnEventsView.as_view(), name="turn-events"),
    re_path(r"^turns/(?P<turn_id>[^/]+)/stop/?$", TurnStopView.as_view(), name="turn-stop"),
    re_path(r"^sessions/(?P<session_id>[^/]+)/?$", SessionView.as_view(), name="session"),
]
