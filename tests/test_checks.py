"""System checks of the A2A_ENDPOINT setting: one test per check id, each with a hint."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.core.checks import ERROR, WARNING
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from a2a_endpoint.checks import check_settings

# The suite's own endpoint is open (tests/settings.py); a valid deployment is closed.
VALID = {
    **settings.A2A_ENDPOINT,
    "PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}


@pytest.fixture(autouse=True)
def _closed_endpoint():
    with override_settings(A2A_ENDPOINT=VALID):
        yield


def a2a_settings(**overrides: Any) -> dict[str, Any]:
    return {**VALID, **overrides}


def ids(**setting_overrides: Any) -> list[str]:
    """The check ids reported under these Django settings; each must carry a hint."""
    with override_settings(**setting_overrides):
        problems = check_settings()
    for problem in problems:
        assert problem.level == ERROR
        assert problem.hint, problem
        assert problem.msg
    return [problem.id for problem in problems]


def test_valid_settings_pass():
    assert check_settings() == []


def test_agent_as_class_passes():
    from tests.agents import AsyncScriptedAgent

    assert ids(A2A_ENDPOINT=a2a_settings(AGENT=AsyncScriptedAgent)) == []


@pytest.mark.parametrize("value", [None, [], "tests.agents.ScriptedAgent"])
def test_e000_setting_missing_or_not_a_dict(value):
    assert ids(A2A_ENDPOINT=value) == ["a2a_endpoint.E000"]


def test_e000_setting_deleted():
    with override_settings():
        del settings.A2A_ENDPOINT
        problems = check_settings()
    assert [problem.id for problem in problems] == ["a2a_endpoint.E000"]
    assert problems[0].hint


@pytest.mark.parametrize("agent", [None, ""])
def test_e001_agent_unset(agent):
    assert ids(A2A_ENDPOINT=a2a_settings(AGENT=agent)) == ["a2a_endpoint.E001"]


def test_e001_agent_key_absent():
    setting = {key: value for key, value in VALID.items() if key != "AGENT"}
    assert ids(A2A_ENDPOINT=setting) == ["a2a_endpoint.E001"]


@pytest.mark.parametrize(
    "agent", ["tests.agents.NoSuchAgent", "no_such_module.Agent", "not-a-dotted-path"]
)
def test_e002_agent_not_importable(agent):
    assert ids(A2A_ENDPOINT=a2a_settings(AGENT=agent)) == ["a2a_endpoint.E002"]


@pytest.mark.parametrize(
    "agent",
    ["a2a_endpoint.testing.user_message", "a2a_endpoint.types.Caller", "builtins.dict"],
)
def test_e003_agent_not_an_executor(agent):
    assert ids(A2A_ENDPOINT=a2a_settings(AGENT=agent)) == ["a2a_endpoint.E003"]


def test_e004_unknown_key():
    with override_settings(A2A_ENDPOINT=a2a_settings(BLOCKING_TIMOUT=5, Agent="x")):
        [problem] = check_settings()
    assert problem.id == "a2a_endpoint.E004"
    assert "BLOCKING_TIMOUT" in problem.msg
    assert "Agent" in problem.msg
    assert "BLOCKING_TIMEOUT" in problem.hint  # the hint lists the valid keys


@pytest.mark.parametrize(
    "card",
    [
        {},
        {"name": "Only a name"},
        {"description": "Only a description"},
        {"name": "", "description": "Empty name"},
        "Test agent",
        ["Test agent"],
    ],
)
def test_e005_card_without_name_or_description(card):
    assert ids(A2A_ENDPOINT=a2a_settings(CARD=card)) == ["a2a_endpoint.E005"]


def test_e005_card_absent():
    setting = {key: value for key, value in VALID.items() if key != "CARD"}
    assert ids(A2A_ENDPOINT=setting) == ["a2a_endpoint.E005"]


def test_e006_use_tz_false():
    assert ids(USE_TZ=False) == ["a2a_endpoint.E006"]


def test_problems_are_reported_together():
    found = ids(A2A_ENDPOINT={"AGENT": "nowhere.Agent", "TYPO": 1}, USE_TZ=False)
    assert sorted(found) == [
        "a2a_endpoint.E002",
        "a2a_endpoint.E004",
        "a2a_endpoint.E005",
        "a2a_endpoint.E006",
    ]


def test_check_command_passes():
    call_command("check", verbosity=0)


def test_check_command_reports_the_setting():
    with (
        override_settings(A2A_ENDPOINT=a2a_settings(AGENT=None)),
        pytest.raises(SystemCheckError, match=r"a2a_endpoint\.E001"),
    ):
        call_command("check", verbosity=0)


@pytest.mark.parametrize(
    "extensions",
    ["https://ex/a", [{"description": "no uri"}], [{"uri": ""}], ["https://ex/a"]],
)
def test_e007_malformed_extensions(extensions):
    assert ids(A2A_ENDPOINT=a2a_settings(EXTENSIONS=extensions)) == ["a2a_endpoint.E007"]


def test_e008_card_that_is_not_a_valid_agent_card():
    card = {**VALID["CARD"], "skills": [{"id": "s", "name": "S", "description": "no tags"}]}
    assert ids(A2A_ENDPOINT=a2a_settings(CARD=card)) == ["a2a_endpoint.E008"]


REDIS_LAYER = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}
MEMORY_LAYER = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


def celery_ids(bus: str, layers: dict[str, Any]) -> list[str]:
    overrides: dict[str, Any] = {
        "A2A_ENDPOINT": a2a_settings(EXECUTION_BACKEND="celery", EVENT_BUS=bus),
        "CHANNEL_LAYERS": layers,
    }
    with override_settings(**overrides):
        return [problem.id for problem in check_settings()]


def test_celery_with_a_cross_process_bus_passes():
    assert celery_ids("channels", REDIS_LAYER) == []


@pytest.mark.parametrize(
    ("bus", "layers"),
    [("memory", REDIS_LAYER), ("channels", MEMORY_LAYER), ("channels", {})],
)
def test_e009_celery_without_a_cross_process_bus(bus, layers):
    assert celery_ids(bus, layers) == ["a2a_endpoint.E009"]


def test_e010_celery_not_installed(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "celery", None)  # import celery → ImportError
    assert celery_ids("channels", REDIS_LAYER) == ["a2a_endpoint.E010"]


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_w001_sqlite_with_celery():
    sqlite = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
    with override_settings(
        A2A_ENDPOINT=a2a_settings(EXECUTION_BACKEND="celery", EVENT_BUS="channels"),
        CHANNEL_LAYERS=REDIS_LAYER,
        DATABASES=sqlite,
    ):
        problems = check_settings()
    assert [(p.id, p.level) for p in problems] == [("a2a_endpoint.W001", WARNING)]
    assert problems[0].hint


# --- access: DRF classes, an open endpoint, the card's security schemes ---------------------


def access_problems(**a2a: Any) -> list[Any]:
    with override_settings(A2A_ENDPOINT=a2a_settings(**a2a)):
        problems = check_settings()
    for problem in problems:
        assert problem.hint, problem
        assert problem.msg, problem
    return problems


def test_unimportable_drf_class_is_e011():
    [problem] = access_problems(AUTHENTICATION_CLASSES=["myproject.auth.Missing"])
    assert (problem.id, problem.level) == ("a2a_endpoint.E011", ERROR)


def test_open_endpoint_with_debug_off_is_w010():
    open_endpoint = {"PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"]}
    with override_settings(DEBUG=False):
        [problem] = access_problems(**open_endpoint)
    assert (problem.id, problem.level) == ("a2a_endpoint.W010", WARNING)
    with override_settings(DEBUG=True):
        assert access_problems(**open_endpoint) == []
    with override_settings(DEBUG=False):
        assert access_problems(PERMISSION_CLASSES=[]) != []  # no class: open too


class UndescribedAuthentication:
    def authenticate(self, request: Any) -> None:
        return None


def test_authentication_class_the_card_cannot_describe_is_w011():
    classes = [UndescribedAuthentication, "rest_framework.authentication.BasicAuthentication"]
    [problem] = access_problems(AUTHENTICATION_CLASSES=classes)
    assert (problem.id, problem.level) == ("a2a_endpoint.W011", WARNING)
    assert "UndescribedAuthentication" in problem.msg
    card = {
        **VALID["CARD"],
        "securitySchemes": {"basic": {"httpAuthSecurityScheme": {"scheme": "Basic"}}},
    }
    assert access_problems(AUTHENTICATION_CLASSES=classes, CARD=card) == []


def test_a_loosened_ssrf_guard_with_debug_off_is_w012():
    with override_settings(DEBUG=False):
        [problem] = access_problems(PUSH_ALLOW_PRIVATE_NETWORKS=True, PUSH_ALLOW_HTTP=True)
        assert (problem.id, problem.level) == ("a2a_endpoint.W012", WARNING)
        assert "PUSH_ALLOW_HTTP and PUSH_ALLOW_PRIVATE_NETWORKS" in problem.msg
        assert access_problems(PUSH_ALLOW_HTTP=True, PUSH_NOTIFICATIONS=False) == []
        assert access_problems() == []
    with override_settings(DEBUG=True):
        assert access_problems(PUSH_ALLOW_PRIVATE_NETWORKS=True) == []
