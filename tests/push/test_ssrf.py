"""The SSRF guard of push notifications: every refused address class, in every spelling, and
hosts that resolve to them (``a2a_endpoint.push.ssrf``)."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

from a2a_endpoint.push.ssrf import RefusedURL, address_refusal, check_url

REFUSED = {
    "127.0.0.1": "loopback",
    "127.255.0.9": "loopback",
    "::1": "loopback",
    "10.0.0.1": "private",
    "172.16.5.4": "private",
    "172.31.255.255": "private",
    "192.168.1.1": "private",
    "fc00::1": "private",  # IPv6 unique-local
    "fd12:3456::1": "private",
    "169.254.169.254": "link-local",  # cloud metadata endpoint
    "169.254.0.1": "link-local",
    "fe80::1": "link-local",
    "224.0.0.1": "multicast",
    "239.255.255.250": "multicast",
    "ff02::1": "multicast",
    "0.0.0.0": "unspecified",
    "::": "unspecified",
    "240.0.0.1": "",  # reserved (Python also calls it private)
    "100.64.0.1": "not globally routable",  # carrier-grade NAT
    "192.0.2.10": "",  # documentation
    "2001:db8::1": "",  # documentation
    "fec0::1": "site-local",
    "64:ff9b::7f00:1": "",  # NAT64 of 127.0.0.1
    # IPv4 carried in IPv6: mapped, compatible, 6to4, Teredo.
    "::ffff:127.0.0.1": "loopback address (as IPv4 in IPv6)",
    "::ffff:10.1.2.3": "private address (as IPv4 in IPv6)",
    "::ffff:169.254.169.254": "link-local address (as IPv4 in IPv6)",
    "::ffff:0.0.0.0": "unspecified address (as IPv4 in IPv6)",
    "::127.0.0.1": "loopback address (as IPv4 in IPv6)",
    "2002:7f00:1::1": "loopback address (as IPv4 in IPv6)",
    "2002:a9fe:a9fe::": "link-local address (as IPv4 in IPv6)",
}
PUBLIC = ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"]


@pytest.mark.parametrize(("address", "reason"), REFUSED.items())
def test_every_refused_address_class(address: str, reason: str) -> None:
    refusal = address_refusal(ipaddress.ip_address(address))
    assert refusal is not None
    assert reason in refusal


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is None


def resolving(*addresses: str) -> Any:
    """A resolver (getaddrinfo's signature) that answers ``addresses`` for every host."""

    def resolve(host: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
        infos = []
        for address in addresses:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            sockaddr = (address, port, 0, 0) if family == socket.AF_INET6 else (address, port)
            infos.append((family, socket.SOCK_STREAM, 6, "", sockaddr))
        return infos

    return resolve


@pytest.mark.parametrize("address", REFUSED)
def test_a_host_name_resolving_to_a_refused_address_is_refused(address: str) -> None:
    with pytest.raises(RefusedURL, match=r"the host hooks\.example\.com is"):
        check_url("https://hooks.example.com/a2a", resolver=resolving(address))


@pytest.mark.parametrize("literal", ["127.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "169.254.169.254"])
def test_literal_addresses_in_the_url_are_checked_without_a_lookup(literal: str) -> None:
    def no_lookup(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a literal address needs no lookup")

    with pytest.raises(RefusedURL):
        check_url(f"https://{literal}:8443/hook", resolver=no_lookup)


def test_localhost_as_the_system_resolves_it_is_refused() -> None:
    with pytest.raises(RefusedURL, match="loopback"):
        check_url("https://localhost/hook")  # the real getaddrinfo


def test_one_private_address_among_public_ones_refuses_the_host() -> None:
    with pytest.raises(RefusedURL, match=r"private address \(10\.0\.0\.7\)"):
        check_url("https://hooks.example.com/", resolver=resolving("93.184.216.34", "10.0.0.7"))


def test_a_public_host_gives_the_addresses_to_connect_to() -> None:
    destination = check_url(
        "https://Hooks.Example.com./a2a?x=1",
        resolver=resolving("93.184.216.34", "2606:4700:4700::1111", "93.184.216.34"),
    )
    assert destination.host == "hooks.example.com"
    assert destination.port == 443
    assert destination.scheme == "https"
    assert [str(a) for a in destination.addresses] == ["93.184.216.34", "2606:4700:4700::1111"]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://hooks.example.com/", "scheme must be https"),
        ("ftp://hooks.example.com/", "scheme must be https"),
        ("file:///etc/passwd", "scheme must be https"),
        ("https://user:secret@hooks.example.com/", "must not carry credentials"),
        ("https:///no-host", "has no host"),
        ("https://hooks.example.com:99999/", "not valid"),
        ("https://[::1/", "not valid"),
    ],
)
def test_urls_refused_before_any_lookup(url: str, reason: str) -> None:
    with pytest.raises(RefusedURL, match=reason):
        check_url(url, resolver=resolving("93.184.216.34"))


def test_http_only_when_allowed() -> None:
    destination = check_url(
        "http://hooks.example.com/", allow_http=True, resolver=resolving("93.184.216.34")
    )
    assert (destination.scheme, destination.port) == ("http", 80)


def test_a_host_that_does_not_resolve_is_refused() -> None:
    def failing(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(RefusedURL, match="cannot be resolved"):
        check_url("https://nowhere.invalid/", resolver=failing)


def test_the_allow_list_and_private_networks_switch() -> None:
    allowed = {"hooks.example.com", "127.0.0.1"}
    with pytest.raises(RefusedURL, match="not among the allowed push hosts"):
        check_url(
            "https://other.example.com/", allowed_hosts=allowed, resolver=resolving("8.8.8.8")
        )
    # On the list, a loopback webhook is still refused unless private networks are allowed
    # (the conformance kit's webhook listens on 127.0.0.1).
    with pytest.raises(RefusedURL, match="loopback"):
        check_url("https://127.0.0.1:9000/", allowed_hosts=allowed)
    destination = check_url(
        "http://127.0.0.1:9000/hook",
        allow_http=True,
        allowed_hosts=allowed,
        allow_private_networks=True,
    )
    assert [str(a) for a in destination.addresses] == ["127.0.0.1"]
