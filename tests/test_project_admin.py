"""The sample project's token admin: keys masked on the list page, whole on a token's page."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db


@override_settings(ROOT_URLCONF="project.urls", STATIC_URL="/static/")
def test_token_keys_are_masked_in_the_list(django_user_model):
    root = django_user_model.objects.create_superuser("root", password="pw")
    alice = django_user_model.objects.create_user("alice")
    key = Token.objects.create(user=alice).key
    client = Client()
    client.force_login(root)
    listing = client.get("/admin/authtoken/tokenproxy/")
    assert listing.status_code == 200
    assert key.encode() not in listing.content
    assert key[:6].encode() in listing.content
    page = client.get(f"/admin/authtoken/tokenproxy/{alice.pk}/change/")
    assert page.status_code == 200
    assert key.encode() in page.content
    assert client.get("/admin/authtoken/tokenproxy/add/").status_code == 200
