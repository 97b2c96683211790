"""Who administers a bot: the operator names admins; a platform's role counts only in a place the operator
listed, and only when the profile lets roles count (`AccessGate.is_admin`, the one decision)."""

from __future__ import annotations

from typing import Any

import pytest

from hermes_engine.config import AccessRules
from hermes_engine.policy.access import AccessGate
from hermes_engine.policy.pairing import MemoryPairingStore, Pairing
from hermes_engine.ports.inbound import ChatKind, InboundMessage, message_from_payload, message_to_payload


def gate(**rules: Any) -> AccessGate:
    return AccessGate(AccessRules(**rules), Pairing(MemoryPairingStore()))


def message(user_id: str = "7", **facts: Any) -> InboundMessage:
    return InboundMessage(platform="discord", account="bot", chat_kind=ChatKind.CHANNEL, chat_id="c1",
                          user_id=user_id, text="/secret", message_id="m1", **facts)


def test_a_platform_role_in_a_place_the_operator_did_not_list_makes_nobody_an_admin():
    assert not gate().is_admin(message(platform_admin=True, place_listed=False))


def test_a_platform_role_in_a_listed_place_makes_an_admin():
    assert gate().is_admin(message(platform_admin=True, place_listed=True))


def test_with_platform_admins_off_only_the_operators_list_names_admins():
    rules = gate(platform_admins=False, admins=["8"])
    assert not rules.is_admin(message(platform_admin=True, place_listed=True))
    assert rules.is_admin(message("8"))


@pytest.mark.parametrize("facts", [{}, {"platform_admin": True}, {"place_listed": True}],
                         ids=["no role", "a role in an unlisted place", "a listed place without a role"])
def test_an_admin_the_operator_named_is_an_admin_anywhere(facts):
    assert gate(admins=[7]).is_admin(message("7", **facts))  # an id unquoted in YAML is still the id


def test_the_inbox_keeps_whether_the_place_was_listed():
    kept = message_from_payload(message_to_payload(message(platform_admin=True, place_listed=True)))
    assert kept.platform_admin and kept.place_listed
    older = message_to_payload(message(platform_admin=True, place_listed=True))
    del older["place_listed"]  # recorded before the fact was reported: the role does not count on replay
    assert not gate().is_admin(message_from_payload(older))
