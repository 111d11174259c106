"""factory_boy factories for the chat models (tests and benchmarks).

Call `XFactory.create(...)` (the same as `XFactory(...)`): its return type is the model.
"""

from __future__ import annotations

import datetime as dt

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from chat.models import ChatLog, ChatSession


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")


class ChatSessionFactory(factory.django.DjangoModelFactory[ChatSession]):
    class Meta:
        model = ChatSession

    user = factory.SubFactory(UserFactory)
    title = factory.Sequence(lambda n: f"Session {n}")
    created_at = factory.Sequence(lambda n: dt.datetime(2026, 11, 1, tzinfo=dt.UTC) + dt.timedelta(hours=n))
    updated_at = factory.SelfAttribute("created_at")


class ChatLogFactory(factory.django.DjangoModelFactory[ChatLog]):
    class Meta:
        model = ChatLog

    session = factory.SubFactory(ChatSessionFactory)
    user = factory.SelfAttribute("session.user")
    user_message = "What is my portfolio worth?"
    response = "Your portfolio is worth $1,000."
    citations = factory.LazyFunction(
        lambda: [
            {
                "source": "silvia://your-portfolio",
                "title": "Your portfolio",
                "cited_text": "total: 1000",
                "target": {"kind": "portfolio"},
            }
        ]
    )
    inline_citations = factory.LazyFunction(
        lambda: [
            {
                "source": "silvia://your-portfolio",
                "title": "Your portfolio",
                "cited_text": "total: 1000",
                "start": 24,
                "end": 30,
                "target": {"kind": "portfolio"},
            }
        ]
    )
    prompt_version = "v5"
    model = "claude-sonnet-4-5-20250929"
    created_at = factory.Sequence(lambda n: dt.datetime(2026, 11, 2, tzinfo=dt.UTC) + dt.timedelta(minutes=n))
