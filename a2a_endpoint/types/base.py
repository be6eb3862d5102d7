"""The shared base of the wire types: the ``Wire`` struct, integer and Struct aliases, and
the helpers the other modules of ``a2a_endpoint.types`` build on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec

INT32_MAX = 2**31 - 1
NonNegativeInt32 = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=INT32_MAX)]
Struct = dict[str, Any]


class Wire(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """Base of all wire types."""


def format_timestamp(value: datetime) -> str:
    """ProtoJSON timestamp: UTC, ``Z`` suffix, millisecond precision (A2A §5.6.1).

    An aware value is converted to UTC first; a naive one is taken to be UTC already.
    """
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    # isoformat pads the year to four digits (strftime's %Y does not on glibc).
    return value.isoformat(timespec="milliseconds") + "Z"


def _require(condition: bool, field: str, message: str) -> None:
    # msgspec turns a ValueError raised in __post_init__ into a ValidationError that names the
    # struct's path; "field: " lets the error builder name the offending member itself.
    if not condition:
        raise ValueError(f"{field}: {message}" if field else message)
