"""Where a job is delivered: `origin`, the chat it is made in (a DM, a Slack thread, a Discord channel or thread),
or another group or channel of the same platform and account, named as people name it there (a Telegram chat id
or `@username`, a Slack `C…` id or `#name`, a Discord channel id or mention): the adapter reads the name, as it
is the one that looks the chat up.

Such a chat is taken only where the job's owner may write (the access gate, `Host.may_write`, as if they wrote
there) and the bot is present and may post (the adapter asks its platform, `Host.chat_presence`); both are asked
when the job is made or its `deliver` changed, and again before each run (`admission.py`). What is delivered
there joins that chat's conversation: the session key a message of the owner's there would have.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget

ORIGIN = "origin"
NAMED = "named"  # the key, in a job's stored target, of the chat as its owner named it (absent: its origin)

class BadTarget(ValueError):
    """A `deliver` that names no chat the bot may post in for this person; the message is one sentence."""


@dataclass(frozen=True)
class Destination:
    """A job's chat: the target posts go to, and the conversation (session key) they are written into."""

    target: dict[str, Any]
    session_key: str


def chat_reference(deliver: str) -> str | None:
    """The chat `deliver` names, as its owner wrote it, for the platform's adapter to look up (which says how a
    chat is named there when this names none); None for the chat the job is made in."""
    text = deliver.strip()
    return None if text.lower() in ("", ORIGIN) else text


def is_named(target: dict[str, Any]) -> bool:
    """The job goes to a chat its owner named, not to the one it was made in."""
    return bool(target.get(NAMED))


async def destination(host: Host, origin: ReplyTarget, user_id: str | None, deliver: str) -> Destination | None:
    """The chat `deliver` names, checked for this person now: the bot is present there and may post, and they may
    write there. None for the origin (the caller keeps the chat the job is made in)."""
    reference = chat_reference(deliver)
    if reference is None:
        return None
    if user_id is None:
        raise BadTarget("a job can be sent to another chat only when it is made in a chat, by its owner.")
    presence = await host.chat_presence(ReplyTarget(origin.platform, origin.account, reference), writer=user_id)
    if not presence.present:
        raise BadTarget(f"I cannot post in {deliver.strip()}: {presence.why or 'I am not in that chat'}.")
    if presence.chat_kind is ChatKind.DM:
        raise BadTarget(f"{deliver.strip()} is a direct chat; a job goes to your own chat with me, or to a group "
                        "or channel.")
    target = ReplyTarget(origin.platform, origin.account, presence.chat_id, presence.thread_id)
    if not await host.may_write(target, user_id, direct=False):
        raise BadTarget(f"you may not write in {deliver.strip()} yourself, so I do not post there for you.")
    as_if = InboundMessage(platform=target.platform, account=target.account, chat_kind=presence.chat_kind,
                           chat_id=target.chat_id, thread_id=target.thread_id, user_id=user_id, text="",
                           message_id="", synthetic=True)
    return Destination({**target.to_dict(), NAMED: deliver.strip()}, as_if.session_key(host.profile.shared_sessions))


async def absence(host: Host, target: dict[str, Any], writer: str) -> str | None:
    """Why the bot may no longer post in a named chat for `writer` (None: it may, or the job goes to its origin)."""
    if not is_named(target):
        return None
    presence = await host.chat_presence(ReplyTarget.from_dict(target), writer=writer)
    return None if presence.present else f"I cannot post in {target[NAMED]} any more ({presence.why or 'not in it'})"
