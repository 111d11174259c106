"""The API against its own OpenAPI schema (issue 39): schemathesis generates requests for every operation of
`/api/schema/` (maya's token; her demo session's id where an operation names a session) and checks that no answer
is a server error and every status answered is one the schema documents (`GET /api/chat/sessions/?page=null`'s
404 was not)."""

from __future__ import annotations

import io

import pytest
import schemathesis
from django.core.management import call_command
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

from silvia.wsgi import application

CARDS = "d93ada3e-af5f-4e4e-823c-781fec71f26d"

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)


@pytest.fixture
def token(transactional_db):
    call_command("import_turns", "examples/turns", create_users=True, stdout=io.StringIO())
    from django.contrib.auth import get_user_model

    return Token.objects.create(user=get_user_model().objects.get(username="maya")).key


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_answer_is_documented_and_none_is_a_server_error(case, token):
    if "session_id" in (case.path_parameters or {}) and case.method == "GET":
        case.path_parameters["session_id"] = CARDS
    case.call_and_validate(
        headers={"Authorization": f"Token {token}"},
        checks=[not_a_server_error, status_code_conformance],
    )
