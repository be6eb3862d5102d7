"""DRF authentication classes for A2A callers.

A module of its own, importing nothing but DRF's authentication module and Django's ORM
basics: DRF resolves ``DEFAULT_AUTHENTICATION_CLASSES`` while ``rest_framework.views`` is
being imported, so a class named there must not live in a module that imports the views
(``a2a_endpoint.auth`` does).
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import connections, router
from django.db.models import Model
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

__all__ = ["BearerTokenAuthentication"]


class BearerTokenAuthentication(TokenAuthentication):
    """DRF's token authentication with the standard scheme: ``Authorization: Bearer <key>``.

    DRF's own class expects ``Token <key>``; A2A clients speak HTTP bearer (the card's
    ``httpAuthSecurityScheme`` with ``scheme: Bearer``). Same tokens, same admin, same
    ``drf_create_token`` command, same answers. Two differences:

    - A key with a dot is a JWT (header.payload.signature), not a DRF key: it is left to the
      next class (simplejwt's shares the Bearer scheme). DRF stops at the first class that
      raises, so without this the two could not be used together.
    - The token and its user are read with one written-out statement (the ORM's own
      ``select_related("user")`` join, compiled once per process) instead of a queryset
      built and compiled for every request: the same single query per request, no cache,
      a revoked token is refused at once (bench/README.md, "Cost of authentication").
    """

    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        try:
            return super().authenticate(request)
        except _NotOurs:
            return None

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        if "." in key:
            raise _NotOurs
        token = find_token(self.get_model(), key)
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return token.user, token


class _NotOurs(Exception):
    pass


class _Statement:
    """``SELECT <token columns>, <user columns> FROM token JOIN user WHERE key = %s``, with
    each column's converters (as the ORM's compiler applies them: e.g. SQLite datetimes)."""

    def __init__(self, model: type[Model], alias: str) -> None:
        connection = connections[alias]
        quote = connection.ops.quote_name
        user_field = model._meta.get_field("user")
        self.model, self.user_model = model, user_field.related_model
        token_table = model._meta.db_table
        user_table = self.user_model._meta.db_table
        token_fields = list(model._meta.concrete_fields)
        user_fields = list(self.user_model._meta.concrete_fields)
        self.token_names = [field.attname for field in token_fields]
        self.user_names = [field.attname for field in user_fields]
        columns = [field.get_col(token_table) for field in token_fields]
        columns += [field.get_col(user_table) for field in user_fields]
        self.converters = [
            (index, column, converters)
            for index, column in enumerate(columns)
            if (
                converters := connection.ops.get_db_converters(column)
                + column.get_db_converters(connection)
            )
        ]
        selected = ", ".join(f"{quote(c.alias)}.{quote(c.target.column)}" for c in columns)
        self.sql = (
            f"SELECT {selected} FROM {quote(token_table)} "
            f"INNER JOIN {quote(user_table)} ON {quote(token_table)}.{quote(user_field.column)}"
            f" = {quote(user_table)}.{quote(self.user_model._meta.pk.column)} "
            f"WHERE {quote(token_table)}.{quote(model._meta.get_field('key').column)} = %s"
        )

    def row_to_token(self, alias: str, row: tuple[Any, ...]) -> Any:
        values = list(row)
        connection = connections[alias]
        for index, column, converters in self.converters:
            for convert in converters:
                values[index] = convert(values[index], column, connection)
        split = len(self.token_names)
        token = self.model.from_db(alias, self.token_names, values[:split])
        token.user = self.user_model.from_db(alias, self.user_names, values[split:])
        return token


@functools.cache
def _statement(model: type[Model], alias: str) -> _Statement:
    return _Statement(model, alias)


def find_token(model: type[Model], key: str) -> Any:
    """The token ``key`` with its user (loaded), or None: one query."""
    alias = router.db_for_read(model)
    statement = _statement(model, alias)
    with connections[alias].cursor() as cursor:
        cursor.execute(statement.sql, [key])
        row = cursor.fetchone()
    return None if row is None else statement.row_to_token(alias, row)
