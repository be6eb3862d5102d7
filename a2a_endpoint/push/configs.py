"""What a push notification config may hold, checked before it is stored (-32602 naming the
field): a webhook URL the SSRF guard accepts, and a token and credentials that can travel
in HTTP headers and fit their columns."""

from __future__ import annotations

import logging
import re

from a2a_endpoint import models, types
from a2a_endpoint.errors import InvalidParamsError
from a2a_endpoint.push.sender import webhook_policy
from a2a_endpoint.push.ssrf import RefusedURL, check_url

logger = logging.getLogger("a2a_endpoint.push")

__all__ = ["check_config"]

#: RFC 9110 §5.6.2 token: what an authentication scheme is made of.
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
#: A header value: visible ASCII and spaces (no CR/LF: no header injection).
_HEADER_VALUE = re.compile(r"^[\x20-\x7e]*$")


def _check_length(value: str, where: str, column: str) -> None:
    limit = models.PushNotificationConfig._meta.get_field(column).max_length or 0
    if len(value) > limit:
        raise InvalidParamsError(
            field=where, description=f"At most {limit} characters ({len(value)} given)"
        )


def _check_header_value(value: str, where: str) -> None:
    if not _HEADER_VALUE.match(value):
        raise InvalidParamsError(
            field=where,
            description="Only visible ASCII characters and spaces (it is sent in a header)",
        )


def _check_url(url: str, where: str) -> None:
    if not url:
        raise InvalidParamsError(field=where, description="url is required")
    _check_length(url, where, "url")
    try:
        check_url(url, **webhook_policy())  # type: ignore[arg-type]
    except RefusedURL as exc:
        if exc.transient:
            # DNS may fail now and work later: the delivery checks again (and refuses then).
            logger.info("Accepted a push config whose host does not resolve now")
            return
        raise InvalidParamsError(
            "The push notification URL is refused", field=where, description=exc.reason
        ) from None


def check_config(config: types.TaskPushNotificationConfig, prefix: str = "") -> None:
    """Raise InvalidParamsError for a config that cannot be stored or sent to.

    ``prefix``: where the config is in the params (``configuration.taskPushNotificationConfig.``
    in SendMessage). Resolves the URL's host (blocking: call it off the event loop).
    """
    _check_length(config.id, f"{prefix}id", "config_id")
    _check_length(config.token, f"{prefix}token", "token")
    _check_header_value(config.token, f"{prefix}token")
    authentication = config.authentication
    if authentication is not None:
        where = f"{prefix}authentication"
        if not _TOKEN.match(authentication.scheme):
            raise InvalidParamsError(
                field=f"{where}.scheme",
                description="An HTTP authentication scheme (Bearer, Basic ...) is required",
            )
        _check_length(authentication.scheme, f"{where}.scheme", "auth_scheme")
        _check_length(authentication.credentials, f"{where}.credentials", "auth_credentials")
        _check_header_value(authentication.credentials, f"{where}.credentials")
    _check_url(config.url, f"{prefix}url")
