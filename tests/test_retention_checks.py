"""System checks of the retention settings (a2a_endpoint.E020-E026), and how RETENTION is read:
one test per check id, each with a hint."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.checks import ERROR
from django.test import override_settings

from a2a_endpoint import store
from a2a_endpoint.checks import check_settings
from a2a_endpoint.lifecycle import TaskState

# A valid deployment is closed (the suite's endpoint is open: tests/settings.py).
VALID = {
    **settings.A2A_ENDPOINT,
    "PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}


def problems(**overrides: Any) -> list[tuple[str, str]]:
    """(id, message) of each problem reported with these A2A_ENDPOINT keys; each has a hint."""
    with override_settings(A2A_ENDPOINT={**VALID, **overrides}):
        found = check_settings()
    for problem in found:
        assert problem.level == ERROR
        assert problem.hint, problem
    return [(problem.id, problem.msg) for problem in found]


def ids(**overrides: Any) -> list[str]:
    return [check_id for check_id, _ in problems(**overrides)]


@pytest.mark.parametrize(
    "retention",
    [
        {},
        {"completed": "30d", "failed": 90, "canceled": "12h", "rejected": "45m"},
        {"*": 14, "input_required": "2d", "AUTH-REQUIRED": 7.5},
        {"TASK_STATE_COMPLETED": timedelta(days=1)},
    ],
)
def test_valid_retention_passes(retention):
    assert ids(RETENTION=retention, RETENTION_BATCH_SIZE=100, RETENTION_BATCH_PAUSE=0.05) == []


@pytest.mark.parametrize("retention", [["completed", "30d"], "30d", 30])
def test_e020_retention_not_a_dict(retention):
    assert ids(RETENTION=retention) == ["a2a_endpoint.E020"]


@pytest.mark.parametrize("state", ["complete", "done", "unspecified", 3])
def test_e021_unknown_state(state):
    found = problems(RETENTION={state: "30d"})
    assert [check_id for check_id, _ in found] == ["a2a_endpoint.E021"]
    assert repr(state) in found[0][1]


@pytest.mark.parametrize("state", ["submitted", "working", "TASK_STATE_WORKING"])
def test_e022_active_state(state):
    assert ids(RETENTION={"completed": 30, state: "30d"}) == ["a2a_endpoint.E022"]


@pytest.mark.parametrize(
    "age", ["30 days", "30w", "-1d", "0d", 0, -5, True, None, [30], "1e3d", 40_000, "nan"]
)
def test_e023_bad_age(age):
    assert ids(RETENTION={"completed": age}) == ["a2a_endpoint.E023"]


def test_every_bad_entry_is_reported():
    found = ids(RETENTION={"done": "30d", "working": 5, "failed": "soon", "*": "x"})
    assert found == [f"a2a_endpoint.E02{n}" for n in (1, 2, 3, 3)]  # "*": "x" too


def test_e024_state_named_twice():
    found = problems(RETENTION={"completed": "30d", "TASK_STATE_COMPLETED": "1d"})
    assert [check_id for check_id, _ in found] == ["a2a_endpoint.E024"]
    assert "completed twice" in found[0][1]


@pytest.mark.parametrize("size", [0, -1, 10_001, 2.5, "500", True])
def test_e025_bad_batch_size(size):
    assert ids(RETENTION_BATCH_SIZE=size) == ["a2a_endpoint.E025"]


@pytest.mark.parametrize("pause", [-0.1, "0.1", float("inf"), float("nan"), True])
def test_e026_bad_batch_pause(pause):
    assert ids(RETENTION_BATCH_PAUSE=pause) == ["a2a_endpoint.E026"]


# --- how RETENTION is read (store.retention_policy) -----------------------------------------


def test_star_fills_every_terminal_state_not_named():
    policy = store.retention_policy({"failed": "90d", "*": "30d", "input_required": "12h"})
    assert policy == {
        TaskState.COMPLETED: timedelta(days=30),
        TaskState.CANCELED: timedelta(days=30),
        TaskState.REJECTED: timedelta(days=30),
        TaskState.FAILED: timedelta(days=90),
        TaskState.INPUT_REQUIRED: timedelta(hours=12),
    }


def test_interrupted_states_are_never_covered_by_star():
    policy = store.retention_policy({"*": 1})
    assert set(policy) == {
        TaskState.COMPLETED,
        TaskState.FAILED,
        TaskState.CANCELED,
        TaskState.REJECTED,
    }


def test_the_setting_is_read_lazily():
    assert store.retention_policy() == {}  # the default: keep every task
    with override_settings(A2A_ENDPOINT={**VALID, "RETENTION": {"completed": "2h"}}):
        assert store.retention_policy() == {TaskState.COMPLETED: timedelta(hours=2)}


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("30d", timedelta(days=30)),
        (" 12H ", timedelta(hours=12)),
        ("45m", timedelta(minutes=45)),
        ("1.5d", timedelta(hours=36)),
        (2, timedelta(days=2)),
        (0.5, timedelta(hours=12)),
        ("30", timedelta(days=30)),
    ],
)
def test_ages(text, age):
    assert store.parse_age(text) == age


def test_a_bad_entry_is_named_in_the_error():
    with pytest.raises(store.RetentionError, match=r"RETENTION\['failed'\]: 'soon' is not an age"):
        store.retention_policy({"failed": "soon"})
