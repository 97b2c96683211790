"""Where a job may be delivered: how `deliver` names a chat on each platform, and the two checks a named chat
passes (the owner may write there, the bot is present) before a job is saved or run."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from hermes_engine.clock.targets import BadTarget, absence, chat_reference, destination, is_named
from hermes_engine.ports.inbound import ChatKind, ReplyTarget
from hermes_engine.ports.reply import ChatPresence

DM = ReplyTarget("telegram", "bot1", "42")


@pytest.mark.parametrize("deliver", ["", "origin", "ORIGIN"])
def test_origin_or_nothing_is_the_chat_the_job_is_made_in(deliver: str) -> None:
    assert chat_reference(deliver) is None


def test_another_chat_is_handed_to_the_adapter_as_its_owner_wrote_it() -> None:
    assert chat_reference("  <#C0123ABCD|general> ") == "<#C0123ABCD|general>"


@dataclass
class Host:
    """What `targets.py` asks of the engine: where the bot is, who may write where."""

    presence: ChatPresence = field(default_factory=lambda: ChatPresence(True, "-100555", ChatKind.GROUP))
    writers: set[str] = field(default_factory=lambda: {"42"})
    shared: bool = False
    asked: list[tuple[str, Any]] = field(default_factory=list)

    @property
    def profile(self) -> Any:
        return SimpleNamespace(shared_sessions=self.shared)

    async def chat_presence(self, target: ReplyTarget, *, writer: str | None = None) -> ChatPresence:
        self.asked.append(("presence", target.chat_id))
        assert writer == "42"
        return self.presence

    async def may_write(self, target: ReplyTarget, user_id: str, *, direct: bool) -> bool:
        self.asked.append(("may_write", (target.chat_id, user_id, direct)))
        return user_id in self.writers


async def test_a_named_group_goes_into_the_owners_conversation_there() -> None:
    host = Host()
    found = await destination(host, DM, "42", "@team_chat")  # type: ignore[arg-type]
    assert found is not None
    assert found.target["chat_id"] == "-100555" and found.target["named"] == "@team_chat"
    assert found.session_key == "telegram:bot1:group:-100555:user:42"  # as her own message there would be
    assert ("may_write", ("-100555", "42", False)) in host.asked  # asked as a member of a group, not a DM
    assert is_named(found.target)


async def test_a_shared_conversation_is_the_channels_own() -> None:
    host = Host(ChatPresence(True, "C0123ABCD", ChatKind.CHANNEL), shared=True)
    found = await destination(host, ReplyTarget("slack", "T1", "D1"), "42", "#general")  # type: ignore[arg-type]
    assert found is not None and found.session_key == "slack:T1:channel:C0123ABCD"


async def test_a_chat_without_the_bot_is_refused_with_the_platforms_reason() -> None:
    host = Host(ChatPresence(False, why="I am not a member of that chat"))
    with pytest.raises(BadTarget, match=r"^I cannot post in -100555: I am not a member of that chat\.$"):
        await destination(host, DM, "42", "-100555")  # type: ignore[arg-type]
    assert [what for what, _ in host.asked] == ["presence"]


async def test_a_chat_the_owner_may_not_write_in_is_refused() -> None:
    host = Host(writers=set())
    with pytest.raises(BadTarget, match="you may not write in -100555 yourself"):
        await destination(host, DM, "42", "-100555")  # type: ignore[arg-type]


async def test_another_persons_direct_chat_is_refused() -> None:
    host = Host(ChatPresence(True, "77", ChatKind.DM))
    with pytest.raises(BadTarget, match="is a direct chat"):
        await destination(host, DM, "42", "77")  # type: ignore[arg-type]


async def test_origin_asks_nothing() -> None:
    host = Host()
    assert await destination(host, DM, "42", "origin") is None  # type: ignore[arg-type]
    assert host.asked == []


async def test_before_a_run_a_named_chat_the_bot_left_is_why_it_is_refused_and_origin_is_not_asked() -> None:
    host = Host(ChatPresence(False, "-100555", ChatKind.GROUP, why="I am not a member of that chat"))
    named = {**ReplyTarget("telegram", "bot1", "-100555").to_dict(), "named": "@team_chat"}
    assert await absence(host, named, "42") == (  # type: ignore[arg-type]
        "I cannot post in @team_chat any more (I am not a member of that chat)")
    assert await absence(host, DM.to_dict(), "42") is None  # type: ignore[arg-type]
    assert host.asked == [("presence", "-100555")]
