"""The SSRF guard of push notifications: which webhook URLs a server may POST to.

A push config's URL comes from a client, and the server connects to it: without a guard a
client could make the server call its own loopback services, the private network behind it,
or a cloud's metadata endpoint (169.254.169.254). :func:`check_url` refuses such a URL with
the reason, and returns the addresses it checked, so that the delivery connects to one of
those addresses and not to what a second DNS lookup would say (no DNS-rebinding window).

Refused: a scheme other than https (http only when allowed), credentials in the URL, a host
outside the allow-list when there is one, a host that does not resolve, and any host with an
address that is loopback, private (RFC 1918, IPv6 unique-local), link-local (169.254.0.0/16
with the metadata endpoint, fe80::/10), multicast, reserved, unspecified, or otherwise not
globally routable (100.64.0.0/10, documentation ranges, NAT64's 64:ff9b::/96, ...),
including these addresses carried in IPv6: IPv4-mapped (``::ffff:127.0.0.1``),
IPv4-compatible, 6to4 and Teredo. Every address a
host resolves to must pass: one private address among public ones refuses the host.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[..., list[tuple[Any, ...]]]

__all__ = ["Destination", "RefusedURL", "UnresolvedHost", "address_refusal", "check_url"]


class RefusedURL(ValueError):
    """A webhook URL the server will not call; ``reason`` says why (for the client)."""

    #: A delivery refused for this reason may succeed later (see :class:`UnresolvedHost`).
    transient = False

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnresolvedHost(RefusedURL):
    """The host has no address now: a DNS failure, which a later delivery may not meet."""

    transient = True


@dataclass(frozen=True, slots=True)
class Destination:
    """A checked webhook: connect to one of ``addresses`` (on ``port``), and send ``host``
    as the Host header and TLS server name."""

    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[Address, ...]


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries: mapped (::ffff:a.b.c.d), 6to4, Teredo's
    client, or the deprecated compatible form (::a.b.c.d), which some stacks still route."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:  # 2002:a.b.c.d::/48
        return address.sixtofour
    if address.teredo is not None:  # 2001::/32: (server, client)
        return address.teredo[1]
    packed = address.packed
    if packed[:12] == bytes(12) and packed[12:] not in (bytes(4), bytes(3) + b"\x01"):
        return ipaddress.IPv4Address(packed[12:])
    return None


def address_refusal(address: Address) -> str | None:
    """Why the server must not connect to ``address``, or None when it is public."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            reason = address_refusal(embedded)
            return f"{reason} (as IPv4 in IPv6)" if reason else None
    checks = (
        ("is_unspecified", "an unspecified address"),
        ("is_loopback", "a loopback address"),
        ("is_link_local", "a link-local address"),
        ("is_multicast", "a multicast address"),
        ("is_private", "a private address"),
        ("is_reserved", "a reserved address"),
    )
    for attribute, reason in checks:
        if getattr(address, attribute):
            return reason
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "a site-local address"
    if not address.is_global:
        return "an address that is not globally routable"
    return None


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _resolve(host: str, port: int, resolver: Resolver) -> tuple[Address, ...]:
    try:
        infos = resolver(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise UnresolvedHost(f"the host {host} cannot be resolved") from None
    found: list[Address] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = _literal(str(sockaddr[0]).split("%", 1)[0])  # fe80::1%eth0: no zone
        if address is not None and address not in found:
            found.append(address)
    if not found:
        raise UnresolvedHost(f"the host {host} has no address")
    return tuple(found)


def check_url(
    url: str,
    *,
    allow_http: bool = False,
    allowed_hosts: Collection[str] = (),
    allow_private_networks: bool = False,
    resolver: Resolver | None = None,
) -> Destination:
    """The checked destination of webhook ``url``, or :class:`RefusedURL`.

    ``allowed_hosts``: when not empty, the only host names (or literal addresses) allowed.
    ``allow_private_networks``: skip the address classes (tests, a TCK webhook on
    127.0.0.1, a deployment whose receivers are internal); the host must still resolve.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise RefusedURL(f"the URL is not valid: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme != "https" and not (allow_http and scheme == "http"):
        allowed = "https or http" if allow_http else "https"
        raise RefusedURL(f"the URL's scheme must be {allowed}")
    if parts.username is not None or parts.password is not None:
        raise RefusedURL("the URL must not carry credentials (use the config's authentication)")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise RefusedURL("the URL has no host")
    if allowed_hosts and host not in {name.lower().rstrip(".") for name in allowed_hosts}:
        raise RefusedURL(f"the host {host} is not among the allowed push hosts")
    port = port or (443 if scheme == "https" else 80)
    literal = _literal(host)
    if literal is not None:
        addresses: tuple[Address, ...] = (literal,)
    else:  # looked up at call time: socket.getaddrinfo as it is now (tests replace it)
        addresses = _resolve(host, port, resolver or socket.getaddrinfo)
    if not allow_private_networks:
        for address in addresses:
            reason = address_refusal(address)
            if reason is not None:
                raise RefusedURL(f"the host {host} is {reason} ({address})")
    return Destination(url=url, scheme=scheme, host=host, port=port, addresses=addresses)
