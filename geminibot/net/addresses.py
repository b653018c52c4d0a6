"""What counts as one machine (or one home) when requests are counted or paced per
address: the portal's and the Gemini server's per-client limits, the crawler's pace per
server address."""

from __future__ import annotations

import ipaddress

#: The IPv6 prefix length counted as one: one host or home usually holds a whole /64.
IPV6_PREFIX = 64


def address_key(address: str) -> str:
    """``address`` as the limits count it: an IPv4 address as is, an IPv4-mapped IPv6
    address as IPv4, any other IPv6 address as its /64 network (counting single
    addresses would not limit anyone who holds a /64); anything else (a name) as is."""
    try:
        ip = ipaddress.ip_address(address.split("%", maxsplit=1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip.packed, IPV6_PREFIX), strict=False))
    return str(ip)
