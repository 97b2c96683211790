"""The access gate and the outlets: how "You now have access" reaches a person it let in (through the
platform's outlet, in the person's direct chat; a failed send is logged and loses nothing else), and what an
outlet says of a chat's access when nobody wrote in it (`chat_access`), and whether the bot is present in a chat
named for it to post in (`chat_presence`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from hermes_engine.policy.access import Notify
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import ChatAccess, ChatAccessFacts, ChatPresence, ChatPresenceFacts, Outlet, ReplyThreads

log = logging.getLogger(__name__)


def teller(outlets: Mapping[str, Outlet], platform: str) -> Notify | None:
    """The gate's way to tell this platform's people something, or None before its outlet is attached."""
    outlet = outlets.get(platform)
    if outlet is None:
        return None

    async def tell(chat_id: str, text: str) -> None:
        try:
            await outlet.send(ReplyTarget(platform, "", chat_id), text)
        except Exception:  # noqa: BLE001 - the person is served all the same
            log.warning("could not tell %s chat %s that access was granted", platform, chat_id, exc_info=True)

    return tell


def chat_access(outlets: Mapping[str, Outlet], target: ReplyTarget, *, direct: bool) -> ChatAccess:
    """What the chat's adapter says of it (`ChatAccessFacts`); the profile's rules alone when it says nothing."""
    outlet = outlets.get(target.platform)
    return outlet.chat_access(target, direct=direct) if isinstance(outlet, ChatAccessFacts) else ChatAccess()


async def chat_presence(outlets: Mapping[str, Outlet], target: ReplyTarget, *, writer: str | None = None
                        ) -> ChatPresence:
    """The chat's adapter's word on the bot's presence there (`ChatPresenceFacts`); absent when the platform is not
    attached or its adapter cannot tell, so nothing is posted where the bot may not be."""
    outlet = outlets.get(target.platform)
    if outlet is None:
        return ChatPresence(False, why=f"{target.platform} is not connected")
    if not isinstance(outlet, ChatPresenceFacts):
        return ChatPresence(False, why=f"the {target.platform} adapter cannot tell whether I am in a chat")
    return await outlet.chat_presence(target, writer=writer)



async def replies_to(outlets: Mapping[str, Outlet], target: ReplyTarget, idempotency_key: str
                     ) -> tuple[ReplyTarget, ...]:
    """Where replies to the messages sent under `idempotency_key` go, when the chat's adapter says they go into a
    conversation apart (`ReplyThreads`); none apart otherwise."""
    outlet = outlets.get(target.platform)
    return await outlet.replies_to(target, idempotency_key) if isinstance(outlet, ReplyThreads) else ()
