"""BearerTokenAuthentication reads a token and its user in one written-out statement: the
same objects the ORM's ``select_related("user")`` gives, on every database Django ships."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework import exceptions
from rest_framework.authtoken.models import Token

from a2a_endpoint.authentication import BearerTokenAuthentication, find_token
from tests.auth.conftest import User

pytestmark = pytest.mark.django_db


def test_same_token_and_user_as_the_orm_in_one_query(alice: User):
    expected = Token.objects.select_related("user").get(key=alice.token)
    with CaptureQueriesContext(connection) as queries:
        token = find_token(Token, alice.token)
        user = token.user  # loaded with the token, no second query
    assert len(queries) == 1
    assert (token.pk, token.user_id, token.created) == (
        expected.pk,
        expected.user_id,
        expected.created,
    )
    assert token.created.tzinfo is not None  # converted as the ORM converts it
    fields = [f.attname for f in type(user)._meta.concrete_fields]
    assert [getattr(user, f) for f in fields] == [getattr(expected.user, f) for f in fields]
    assert not token._state.adding
    assert user._state.db == expected.user._state.db


def test_unknown_key_and_inactive_user_are_refused(alice: User):
    auth = BearerTokenAuthentication()
    assert find_token(Token, "0" * 40) is None
    with pytest.raises(exceptions.AuthenticationFailed, match="Invalid token"):
        auth.authenticate_credentials("0" * 40)
    assert auth.authenticate_credentials(alice.token)[0] == alice.user
    alice.user.is_active = False
    alice.user.save()
    with pytest.raises(exceptions.AuthenticationFailed, match="inactive"):
        auth.authenticate_credentials(alice.token)


def test_a_deleted_token_is_refused_at_once(alice: User):
    Token.objects.filter(key=alice.token).delete()
    assert find_token(Token, alice.token) is None
