"""Response shapes of the sessions API (docs/api.md)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chat.api.schema import CITATIONS, INLINE_CITATIONS
from chat.models import ChatLog, ChatSession


@extend_schema_field(CITATIONS)
class CitationsField(serializers.JSONField):
    """The `citations` column, served exactly as stored."""


@extend_schema_field(INLINE_CITATIONS)
class InlineCitationsField(serializers.JSONField):
    """The `inline_citations` column, served exactly as stored."""


class ChatSessionListSerializer(serializers.ModelSerializer):
    """One entry of the sessions list (docs/api.md); `message_count` is annotated by the selector."""

    message_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = ChatSession
        fields = ["id", "title", "created_at", "updated_at", "message_count"]


class ChatLogSerializer(serializers.ModelSerializer):
    """One `ai_chat_logs` row as a message (docs/api.md); the JSON columns exactly as stored."""

    citations = CitationsField(read_only=True)
    inline_citations = InlineCitationsField(read_only=True)

    class Meta:
        model = ChatLog
        fields = [
            "id",
            "user_message",
            "response",
            "citations",
            "inline_citations",
            "prompt_version",
            "model",
            "created_at",
        ]


class ChatSessionDetailSerializer(serializers.ModelSerializer):
    """A session with its messages, oldest first (docs/api.md). `chat.api.rendering` produces the same JSON faster."""

    messages = ChatLogSerializer(many=True, read_only=True)

    class Meta:
        model = ChatSession
        fields = ["id", "title", "created_at", "updated_at", "messages"]
