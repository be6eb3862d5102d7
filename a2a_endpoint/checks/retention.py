"""Checks of the retention settings (E020-E026, docs/retention.md)."""

from __future__ import annotations

from typing import Any

from django.core.checks import Error

from a2a_endpoint.conf import DEFAULTS, SETTING_NAME


def _retention_entry_errors(name: Any, age: Any) -> list[Error]:
    """E021-E023: one RETENTION entry names a state tasks may be deleted in, and an age."""
    from a2a_endpoint import store

    problems = []
    state = None if name == "*" else store.state_named(name)
    if name != "*" and state is None:
        problems.append(
            Error(
                f"{SETTING_NAME}['RETENTION'] names {name!r}, which is not a task state.",
                hint="Use completed, failed, canceled, rejected, input_required, "
                "auth_required, or '*' for every terminal state not named.",
                id="a2a_endpoint.E021",
            )
        )
    elif state is not None and state not in store.PURGEABLE_STATES:
        problems.append(
            Error(
                f"{SETTING_NAME}['RETENTION'] names {name!r}: tasks still submitted or "
                "working are never deleted (their job is owed or running).",
                hint="Name terminal states (or '*'), and interrupted ones "
                "(input_required, auth_required) for abandoned conversations.",
                id="a2a_endpoint.E022",
            )
        )
    try:
        store.parse_age(age)
    except store.RetentionError as exc:
        problems.append(
            Error(
                f"{SETTING_NAME}['RETENTION'][{name!r}]: {exc}",
                hint='Ages are days (30), or strings "30d", "12h", "45m".',
                id="a2a_endpoint.E023",
            )
        )
    return problems


def _retention_errors(user: dict[str, Any]) -> list[Error]:
    """E020-E026: RETENTION is a dict of purgeable states to ages; the batch settings fit."""
    from a2a_endpoint import store

    retention = user.get("RETENTION") or {}
    problems: list[Error] = []
    if not isinstance(retention, dict):
        problems.append(
            Error(
                f"{SETTING_NAME}['RETENTION'] must be a dict of task state to age.",
                hint='e.g. {"completed": "30d", "failed": "90d", "*": "14d"}; {} keeps all.',
                id="a2a_endpoint.E020",
            )
        )
        retention = {}
    for name, age in retention.items():
        problems += _retention_entry_errors(name, age)
    if not problems and retention:
        try:
            store.retention_policy(retention)
        except store.RetentionError as exc:  # what is left: a state named twice
            problems.append(Error(str(exc), hint="Name each state once.", id="a2a_endpoint.E024"))
    size = user.get("RETENTION_BATCH_SIZE", DEFAULTS["RETENTION_BATCH_SIZE"])
    pause = user.get("RETENTION_BATCH_PAUSE", DEFAULTS["RETENTION_BATCH_PAUSE"])
    if size is not None and not (type(size) is int and 1 <= size <= store.MAX_PURGE_BATCH):
        problems.append(
            Error(
                f"{SETTING_NAME}['RETENTION_BATCH_SIZE'] must be an int from 1 to "
                f"{store.MAX_PURGE_BATCH}.",
                hint="Each batch is one transaction holding its tasks' row locks: a few "
                "hundred keeps them short (default 200).",
                id="a2a_endpoint.E025",
            )
        )
    if pause is not None and not (type(pause) in (int, float) and 0 <= pause < float("inf")):
        problems.append(
            Error(
                f"{SETTING_NAME}['RETENTION_BATCH_PAUSE'] must be a number of seconds >= 0.",
                hint="e.g. 0.05; 0 (the default) runs the batches back to back.",
                id="a2a_endpoint.E026",
            )
        )
    return problems
