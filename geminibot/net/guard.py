"""The address guard: which IP addresses a crawl or the portal may connect to.

A crawler that follows links from the open network must not become a way into the
machine it runs on or the network around it: a page may link to
``gemini://127.0.0.1:6379/``, a name may resolve to ``10.0.0.1``, a robots.txt may
redirect to ``gemini://[::1]/``. :class:`AddressGuard` says whether one address may be
reached (pure; no resolving): only public (global unicast) addresses, unless

- ``loopback_only`` (``--test-range``): then only loopback addresses, whatever else;
- an operator allows a network explicitly (``allow``: ``--allow-address CIDR``).

Refused are loopback (``127.0.0.0/8``, ``::1``), private (``10/8``, ``172.16/12``,
``192.168/16``, ``fc00::/7``), link-local (``169.254/16``, ``fe80::/10``), multicast,
unspecified (``0.0.0.0``, ``::``), shared (``100.64/10``), documentation and other
reserved ranges: everything Python's :mod:`ipaddress` does not count as global, and
multicast. An IPv6 address that carries an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``,
6to4 ``2002::/16``, NAT64 ``64:ff9b::/96``) is judged by the IPv4 address it carries.

:class:`~geminibot.net.dns.DnsCache` applies a guard where every client connection gets
its addresses: given a crawl's guard, the Gemini client, the web client and the pacing
lookup connect only to addresses the guard allows (IP literals in URLs and
``--connect-to`` targets included: the cache returns them through the same check). The
addresses checked are the addresses connected to: a name is not resolved again between
the check and the connection. The portal judges the address it pins with the same guard.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: NAT64's well-known prefix (RFC 6052) and its local-use prefix (RFC 8215): the last 32
#: bits are an IPv4 address reached through a translator.
NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


def parse_network(text: str) -> IPNetwork:
    """``--allow-address``'s argument: a network in CIDR notation (``10.1.2.0/24``,
    ``fd00::/8``) or one address (``127.0.0.2``); ValueError with the reason if not."""
    try:
        return ipaddress.ip_network(text.strip().strip("[]"))
    except ValueError as exc:
        raise ValueError(f"{text!r} is not an address or a network (CIDR): {exc}") from None


def ip_of(address: str) -> IPAddress | None:
    """``address`` as an IP address (brackets and an IPv6 zone ``%eth0`` dropped), the
    IPv4 address an IPv6 address carries where it carries one; None for a name."""
    try:
        ip = ipaddress.ip_address(address.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if any(ip in prefix for prefix in NAT64):
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def kind_of(ip: IPAddress) -> str | None:
    """What makes ``ip`` not public (``"loopback"``, ``"private"``...), None if it is."""
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "reserved"
    return None


@dataclass(frozen=True, slots=True)
class AddressGuard:
    """Which addresses may be reached (see the module docstring)."""

    loopback_only: bool = False
    """``--test-range``: loopback only."""
    allow: tuple[IPNetwork, ...] = ()
    """Networks reached although not public (``--allow-address``); not with
    ``loopback_only``."""
    advice: str = ""
    """Appended to a refusal: how this program's operator allows more."""

    def refusal(self, host: str, address: str) -> str | None:
        """Why ``address`` (where ``host`` led) may not be reached, None if it may. A
        name (not an address) is refused: the guard judges resolved addresses."""
        ip = ip_of(address)
        if ip is None:
            return f"{host} is not an IP address; the guard judges addresses{self.advice}"
        kind = kind_of(ip)
        if self.loopback_only:
            if kind == "loopback":
                return None
            return f"--test-range: {host} is not on this machine; only loopback is reached"
        if kind is None or any(ip in network for network in self.allow):
            return None
        return f"{host} is not a public address ({kind}){self.advice}"
