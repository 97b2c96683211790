"""`AccessGate.may_write`: the decision `admit` would make for a person's next message in a chat, made before the
bot posts there on their behalf (a scheduled run), with no pairing offered."""

from __future__ import annotations

from typing import Any

from hermes_engine.config import AccessRules
from hermes_engine.policy.access import AccessGate
from hermes_engine.policy.pairing import MemoryPairingStore, Pairing
from hermes_engine.ports.reply import ChatAccess

BOUNDARY = ChatAccess(membership_boundary=True)


def gate(**rules: Any) -> tuple[AccessGate, MemoryPairingStore]:
    store = MemoryPairingStore()
    return AccessGate(AccessRules(**rules), Pairing(store)), store


async def test_a_listed_person_may_write_and_one_taken_off_the_list_may_not():
    listed, _ = gate(allowed_users=["7"])
    assert await listed.may_write("telegram", "7", ChatAccess())
    assert not await listed.may_write("telegram", "8", ChatAccess())


async def test_the_platforms_own_allowlist_counts_as_the_adapter_hands_it():
    g, _ = gate(allowed_users=["7"])
    assert await g.may_write("telegram", "8", ChatAccess(frozenset({"8"})))


async def test_behind_a_membership_boundary_an_empty_allowlist_lets_every_member_write():
    open_, _ = gate()
    assert await open_.may_write("slack", "U1", BOUNDARY)
    assert not await open_.may_write("discord", "9", ChatAccess())  # a direct chat: not a boundary
    closed, _ = gate(allowed_users=["U2"])
    assert not await closed.may_write("slack", "U1", BOUNDARY)


async def test_asking_offers_no_pairing_to_a_stranger_and_an_approved_one_may_write():
    g, store = gate(allowed_users=["7"], pairing=True)
    assert not await g.may_write("telegram", "8", ChatAccess())
    assert store.read().pending == {}  # `admit` would have issued a code here
    decision = await g.admit("telegram", "8", direct=True)
    assert not decision.allowed and store.read().pending  # the stranger writes: a code is offered
    code = next(iter(store.read().pending))
    g.pairing.approve(code)
    assert await g.may_write("telegram", "8", ChatAccess())
