"""Which hosts `web_fetch` may reach, and how a name becomes the address it connects to.

A model asked to fetch a URL must not become a way into the machine's own network: the cloud metadata
service (169.254.169.254), the database on localhost, the admin page on 10.0.0.1. So a name is resolved
here, every address it resolves to is vetted, and the connection goes to a vetted address (the fetcher
pins it: a DNS answer that changes between the check and the connection cannot redirect it). Only global
unicast addresses pass, unless the profile's allowlist names the host or a network holding the address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class Refused(Exception):
    """A URL or address `web_fetch` will not reach; the message is what the model reads."""


class HostResolver(Protocol):
    """Name → addresses. The system's resolver by default; a profile or a test may bring its own."""

    async def resolve(self, host: str, port: int) -> list[IPAddress]: ...


class SystemResolver:
    """The operating system's resolver (getaddrinfo), off the event loop."""

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        found = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
        return list(dict.fromkeys(found))


def literal_address(host: str) -> IPAddress | None:
    """The address a URL's host names directly (`127.0.0.1`, `[::1]`), or None for a name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _public(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    return address.is_global and not address.is_multicast


@dataclass(frozen=True)
class AddressPolicy:
    """Global unicast addresses, plus what the allowlist names (host names, addresses or CIDR networks)."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def allowing(cls, entries: Iterable[str]) -> AddressPolicy:
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in entries:
            entry = entry.strip()
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry.lower().rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def permits(self, host: str, address: IPAddress) -> bool:
        if host.lower().rstrip(".") in self.hosts or _public(address):
            return True
        return any(address in network for network in self.networks if network.version == address.version)

    async def vet(self, host: str, port: int, resolver: HostResolver) -> list[IPAddress]:
        """The addresses to connect to for `host`; `Refused` when it names or resolves to any address this
        policy does not permit (a name with one private answer is not trusted for the others)."""
        literal = literal_address(host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                addresses = await resolver.resolve(host, port)
            except (OSError, UnicodeError) as exc:
                raise Refused(f"Error: the host {host!r} could not be resolved ({exc}).") from None
            if not addresses:
                raise Refused(f"Error: the host {host!r} has no address.")
        barred = [a for a in addresses if not self.permits(host, a)]
        if barred:
            what = host if literal is not None else f"{host} resolves to {barred[0]}, which"
            raise Refused(f"Error: refused: {what} is a private, loopback, link-local or otherwise non-public "
                          "address; web_fetch reaches only the public internet.")
        return addresses


__all__ = ["AddressPolicy", "HostResolver", "IPAddress", "Refused", "SystemResolver", "literal_address"]
