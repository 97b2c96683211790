"""What `web_fetch` may reach."""

from __future__ import annotations

import ipaddress

import pytest

from hermes_engine.web.addresses import AddressPolicy, IPAddress, Refused


@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
    "224.0.0.251", "239.255.255.250", "::1", "::", "fe80::1", "fd12:3456::1", "ff02::1", "::ffff:127.0.0.1",
    "::ffff:169.254.169.254"])
def test_non_public_addresses_are_not_permitted(address):
    assert not AddressPolicy().permits("example.test", ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"])
def test_public_addresses_are_permitted(address):
    assert AddressPolicy().permits("example.test", ipaddress.ip_address(address))


def test_the_allowlist_admits_named_hosts_and_networks_only():
    policy = AddressPolicy.allowing(["10.1.0.0/16", "Wiki.Internal.", "fd00::/8"])
    assert policy.permits("other.test", ipaddress.ip_address("10.1.200.3"))
    assert policy.permits("wiki.internal", ipaddress.ip_address("192.168.7.7"))
    assert policy.permits("other.test", ipaddress.ip_address("fd00::5"))
    assert not policy.permits("other.test", ipaddress.ip_address("10.2.0.1"))
    assert not policy.permits("other.test", ipaddress.ip_address("169.254.169.254"))


async def test_a_name_with_any_private_answer_is_refused():
    class Mixed:
        async def resolve(self, host: str, port: int) -> list[IPAddress]:
            return [ipaddress.ip_address("93.184.215.14"), ipaddress.ip_address("10.0.0.8")]

    with pytest.raises(Refused, match="10.0.0.8"):
        await AddressPolicy().vet("mixed.test", 80, Mixed())
