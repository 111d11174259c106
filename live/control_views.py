"""A user's control over conversations (SPEC 16): stop a turn, delete a session. Thin views over `live.stops`
and `live.erasure` (docs/live.md#stopping-a-turn, docs/api.md#deleting-a-session)."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.api.views import SessionDetailView
from citations.uuids import parse_uuid
from live.erasure import session_delete
from live.stops import TurnEndedError, TurnNotFoundError, turn_stop

__all__ = ["GONE", "SessionView", "TurnStopView", "gone"]

GONE = OpenApiResponse(
    inline_serializer("TurnGone", {"detail": serializers.CharField(), "session_id": serializers.UUIDField()}),
    description="The turn ended and its events are past their retention; its session's GET holds the stored row.",
)


def gone(session_id: uuid.UUID) -> Response:
    """410 for a reconnect to a turn whose event log was pruned (docs/live.md#retention), naming its session."""
    return Response(
        {
            "detail": "This answer's events are no longer kept. Its conversation holds the saved answer.",
            "session_id": str(session_id),
        },
        status=410,
    )


_STOPPED = inline_serializer(
    "StoppedTurn",
    {
        "turn_id": serializers.UUIDField(),
        "session_id": serializers.UUIDField(),
        "status": serializers.ChoiceField(choices=["stopped"]),
    },
)


class TurnStopView(APIView):
    """Stop the caller's queued or running turn (docs/live.md#stopping-a-turn).

    Its streams end with `error` `{"type": "stopped"}`, nothing of it is
    stored, and its session takes a new turn at once. Another user's turn,
    a missing or malformed id: 404; a turn that already ended: 409.
    """

    @extend_schema(
        request=None,
        responses={
            200: _STOPPED,
            404: OpenApiResponse(description="Not found."),
            409: OpenApiResponse(description='The turn already ended: `{"detail", "status"}`.'),
        },
    )
    def post(self, request: Request, turn_id: str) -> Response:
        turn_uuid = parse_uuid(turn_id)
        if turn_uuid is None:
            raise NotFound()
        try:
            turn = turn_stop(user=request.user, turn_id=turn_uuid)
        except TurnNotFoundError:
            raise NotFound() from None
        except TurnEndedError:
            return Response({"detail": "This turn has already ended."}, status=409)
        return Response({"turn_id": str(turn.id), "session_id": str(turn.session_id), "status": "stopped"})


class SessionView(SessionDetailView):
    """`chat`'s session detail (GET, unchanged), and DELETE: the session and everything of it.

    Routed by `live/urls.py` ahead of `chat.api.urls`, since deleting a
    session also stops and deletes its live turns, which `chat` cannot see.
    """

    @extend_schema(
        responses={
            204: OpenApiResponse(description="Deleted: the session, its turns, live turns and their events."),
            404: OpenApiResponse(description="Not found."),
        },
    )
    def delete(self, request: Request, session_id: str, *args: Any, **kwargs: Any) -> Response:
        session_uuid = parse_uuid(session_id)
        if session_uuid is None or session_delete(user=request.user, session_id=session_uuid) is None:
            raise NotFound()
        return Response(status=204)
