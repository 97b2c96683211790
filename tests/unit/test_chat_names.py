"""How each adapter reads the name of a chat a person wants a job delivered in (`deliver`): the forms people use
on its platform, and for anything else the sentence saying how a chat is named there, with no call to the
platform."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.discord import presence as discord_presence
from adapters.slack import presence as slack_presence
from adapters.telegram import presence as telegram_presence


@pytest.mark.parametrize(("named", "reference"), [
    ("C0123ABCD", "C0123ABCD"), ("#general", "#general"), ("<#C0123ABCD|general>", "C0123ABCD"),
    (" <#G0123ABCD> ", "G0123ABCD"), ("general", None), ("#General Chat", None), ("U0123ABCD", None)])
def test_slack_reads_a_channel_id_a_name_or_a_pasted_mention(named: str, reference: str | None) -> None:
    assert slack_presence.reference(named) == reference


@pytest.mark.parametrize(("named", "reference"), [
    ("112233445566778899", "112233445566778899"), ("<#112233445566778899>", "112233445566778899"),
    ("#general", None), ("1234", None), ("<@112233445566778899>", None)])
def test_discord_reads_a_channel_id_or_a_mention(named: str, reference: str | None) -> None:
    assert discord_presence.reference(named) == reference


class Untouched:
    """A platform client that must not be asked: a name that names no chat is answered without a call."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the platform was asked ({name}) for a name that names no chat")


@pytest.mark.parametrize(("ask", "named", "said"), [
    (lambda named: telegram_presence.chat_presence(Untouched(), named), "the team room", "-1001234567890"),
    (lambda named: telegram_presence.chat_presence(Untouched(), named), "@abc", "@mychannel"),  # five at least
    (lambda named: slack_presence.chat_presence(Untouched(), named), "general", "#general"),  # type: ignore[arg-type]
    (lambda named: discord_presence.chat_presence(Untouched(), named, lambda *_: True), "#general",  # type: ignore[arg-type]
     "<#112233445566778899>"),
])
async def test_anything_else_is_not_present_with_the_sentence_saying_how_chats_are_named(ask: Any, named: str,
                                                                                         said: str) -> None:
    presence = await ask(named)
    assert not presence.present and said in presence.why and not presence.why.endswith(".")
