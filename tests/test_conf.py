"""The A2A_ENDPOINT setting as read through ``a2a_endpoint.conf.app_settings``."""

from __future__ import annotations

import pytest
from django.test import override_settings

from a2a_endpoint import auth
from a2a_endpoint.conf import DEFAULTS, app_settings
from tests import callers
from tests.agents import AsyncScriptedAgent, ScriptedAgent


def test_defaults_apply():
    with override_settings(A2A_ENDPOINT={"AGENT": "tests.agents.ScriptedAgent"}):
        for name in ("BLOCKING_TIMEOUT", "MAX_REQUEST_BYTES", "STRICT_VERSION", "CARD_MAX_AGE"):
            assert getattr(app_settings, name) == DEFAULTS[name]
        assert app_settings.EXTENSIONS == []
        assert app_settings.BASE_URL is None


@pytest.mark.parametrize("value", [None, {}])
def test_missing_setting_means_defaults(value):
    with override_settings(A2A_ENDPOINT=value):
        assert DEFAULTS["MAX_JSON_DEPTH"] == app_settings.MAX_JSON_DEPTH
        assert app_settings.AGENT is None


def test_user_values_override():
    # tests/settings.py sets these two away from their defaults.
    assert app_settings.BLOCKING_TIMEOUT == 10
    assert app_settings.CANCEL_GRACE_PERIOD == 0.5
    assert app_settings.CARD["name"] == "Test agent"


def test_import_strings_are_imported():
    assert app_settings.AGENT is ScriptedAgent
    assert app_settings.CALLER_RESOLVER is callers.any_tenant  # tests/settings.py's
    with override_settings(A2A_ENDPOINT={"CALLER_RESOLVER": "a2a_endpoint.auth.resolve_caller"}):
        assert app_settings.CALLER_RESOLVER is auth.resolve_caller


def test_objects_are_kept_as_given():
    def resolver(request):
        return None

    with override_settings(A2A_ENDPOINT={"AGENT": AsyncScriptedAgent, "CALLER_RESOLVER": resolver}):
        assert app_settings.AGENT is AsyncScriptedAgent
        assert app_settings.CALLER_RESOLVER is resolver


def test_strings_that_are_not_import_strings_stay_strings():
    with override_settings(A2A_ENDPOINT={"EXECUTION_BACKEND": "a2a_endpoint.nowhere.Backend"}):
        assert app_settings.EXECUTION_BACKEND == "a2a_endpoint.nowhere.Backend"


def test_bad_import_string_raises_import_error():
    with (
        override_settings(A2A_ENDPOINT={"AGENT": "tests.agents.NoSuchAgent"}),
        pytest.raises(ImportError),
    ):
        _ = app_settings.AGENT


def test_unknown_attribute_raises_attribute_error():
    with pytest.raises(AttributeError, match="NOT_A_SETTING"):
        _ = app_settings.NOT_A_SETTING
    assert getattr(app_settings, "NOT_A_SETTING", "fallback") == "fallback"


def test_unknown_user_key_is_not_an_attribute():
    with override_settings(A2A_ENDPOINT={"TYPO": 1}), pytest.raises(AttributeError):
        _ = app_settings.TYPO


def test_override_settings_is_seen_immediately():
    assert DEFAULTS["MAX_REQUEST_BYTES"] == app_settings.MAX_REQUEST_BYTES  # now cached
    with override_settings(A2A_ENDPOINT={"MAX_REQUEST_BYTES": 10, "AGENT": AsyncScriptedAgent}):
        assert app_settings.MAX_REQUEST_BYTES == 10
        assert app_settings.AGENT is AsyncScriptedAgent
    assert DEFAULTS["MAX_REQUEST_BYTES"] == app_settings.MAX_REQUEST_BYTES
    assert app_settings.AGENT is ScriptedAgent


def test_every_default_is_readable():
    for name in DEFAULTS:
        getattr(app_settings, name)
