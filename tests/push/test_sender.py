"""The sender's decisions, without a network: backoff, Retry-After, and what a try comes to."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from a2a_endpoint.push import sender
from a2a_endpoint.store import OwedDelivery
from tests.service.builders import a2a_settings

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def owed(attempts: int = 0, give_up_in: float = 3600) -> OwedDelivery:
    return OwedDelivery(
        pk=1,
        config_pk=1,
        config_id="c",
        task_id="t",
        seq=1,
        attempts=attempts,
        next_attempt_at=NOW,
        give_up_at=NOW + timedelta(seconds=give_up_in),
        url="https://hooks.example/",
        token="secret-token",
        auth_scheme="Bearer",
        auth_credentials="secret-credentials",
        body=b"{}",
    )


@pytest.fixture(autouse=True)
def _limits():
    with a2a_settings(PUSH_MAX_ATTEMPTS=4, PUSH_RETRY_DELAY=1.0, PUSH_RETRY_MAX_DELAY=10.0):
        yield


def test_backoff_doubles_with_jitter_up_to_the_cap():
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (12, 10.0)]:
        delays = [sender.backoff(attempt) for _ in range(200)]
        assert all(ceiling / 2 <= delay <= ceiling for delay in delays)
        assert max(delays) - min(delays) > 0  # jitter: not one fixed delay


def test_retry_after_in_seconds_or_as_a_date():
    assert sender.retry_after("7") == 7.0
    assert sender.retry_after("Wed, 02 Dec 2026 12:00:30 GMT", now=NOW.timestamp()) == 30.0
    assert sender.retry_after("Wed, 02 Dec 2026 11:00:00 GMT", now=NOW.timestamp()) == 0.0
    assert sender.retry_after("soon") is None
    assert sender.retry_after(None) is None


def test_a_2xx_is_delivered():
    attempt = sender.weigh(owed(), sender._Result(delivered=True, status=204), NOW)
    assert (attempt.state, attempt.status) == ("delivered", 204)


def test_a_transient_failure_is_retried_later():
    attempt = sender.weigh(owed(1), sender._Result(transient=True, status=503, error="x"), NOW)
    assert attempt.state == "pending"
    assert NOW + timedelta(seconds=1) <= attempt.retry_at <= NOW + timedelta(seconds=2)


def test_retry_after_is_honoured_within_the_largest_delay():
    result = sender._Result(transient=True, status=429, retry_after=3.0)
    assert sender.weigh(owed(), result, NOW).retry_at == NOW + timedelta(seconds=3)
    result = sender._Result(transient=True, status=429, retry_after=3600.0)
    assert sender.weigh(owed(), result, NOW).retry_at == NOW + timedelta(seconds=10)


def test_the_last_try_and_the_last_moment_make_a_dead_letter():
    failure = sender._Result(transient=True, status=500, error="HTTP 500")
    assert sender.weigh(owed(3), failure, NOW).state == "dead"
    assert "4 tries" in sender.weigh(owed(3), failure, NOW).error
    assert sender.weigh(owed(0, give_up_in=0.1), failure, NOW).state == "dead"


def test_a_refusal_that_made_no_request_does_not_count_as_a_try():
    refused = sender._Result(transient=True, error="refused: unresolvable", tried=False)
    assert sender.weigh(owed(3), refused, NOW).state == "pending"


def test_a_permanent_failure_is_dead_at_once():
    assert sender.weigh(owed(), sender._Result(status=404, error="HTTP 404"), NOW).state == "dead"


def test_an_owed_delivery_does_not_show_its_secrets():
    text = repr(owed())
    assert "secret" not in text
