"""Where a job is delivered: `origin`, the chat it is made in (a DM, a Slack thread, a Discord channel or thread),
or another group or channel of the same platform and account, named as people name it:

- Telegram: a chat id (`-1001234567890`) or a public username (`@channelname`);
- Slack: a channel id (`C0123ABCD`, `G…` for an old private one), `#name`, or a pasted mention `<#C0123ABCD>`;
- Discord: a channel id (`112233445566778899`) or a mention `<#112233445566778899>`.

Such a chat is taken only where the job's owner may write (the access gate, `Host.may_write`, as if they wrote
there) and the bot is present and may post (the adapter asks its platform, `Host.chat_presence`); both are asked
when the job is made or its `deliver` changed, and again before each run (`admission.py`). What is delivered
there joins that chat's conversation: the session key a message of the owner's there would have.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget

ORIGIN = "origin"
NAMED = "named"  # the key, in a job's stored target, of the chat as its owner named it (absent: its origin)

_TELEGRAM = re.compile(r"^(-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31})$")
_SLACK = re.compile(r"^(?:<#([CG][A-Z0-9]{6,})(?:\|[^>]*)?>|([CG][A-Z0-9]{6,})|(#[a-z0-9][a-z0-9._-]{0,79}))$")
_DISCORD = re.compile(r"^(?:<#(\d{15,21})>|(\d{15,21}))$")
SPELLINGS = {
    "telegram": "a Telegram chat id such as -1001234567890 or a username such as @mychannel",
    "slack": "a Slack channel id such as C0123ABCD or a name such as #general",
    "discord": "a Discord channel id such as 112233445566778899 or a mention such as <#112233445566778899>",
}


class BadTarget(ValueError):
    """A `deliver` that names no chat the bot may post in for this person; the message is one sentence."""


@dataclass(frozen=True)
class Destination:
    """A job's chat: the target posts go to, and the conversation (session key) they are written into."""

    target: dict[str, Any]
    session_key: str


def chat_reference(deliver: str, platform: str) -> str | None:
    """The chat `deliver` names, as the platform's adapter looks it up (an id, `@username`, `#name`); None for the
    chat the job is made in. Anything else: `BadTarget`, saying how a chat is named on this platform."""
    text = deliver.strip()
    if text.lower() in ("", ORIGIN):
        return None
    pattern = {"telegram": _TELEGRAM, "slack": _SLACK, "discord": _DISCORD}.get(platform)
    match = pattern.match(text) if pattern is not None else None
    if match is None:
        spelled = SPELLINGS.get(platform)
        raise BadTarget(f"deliver is `origin` (this chat) or {spelled}; {text!r} is neither." if spelled else
                        f"on {platform or 'this platform'} a job is delivered only where it is made (deliver=origin).")
    return next(group for group in match.groups() if group)


def is_named(target: dict[str, Any]) -> bool:
    """The job goes to a chat its owner named, not to the one it was made in."""
    return bool(target.get(NAMED))


async def destination(host: Host, origin: ReplyTarget, user_id: str | None, deliver: str) -> Destination | None:
    """The chat `deliver` names, checked for this person now: the bot is present there and may post, and they may
    write there. None for the origin (the caller keeps the chat the job is made in)."""
    reference = chat_reference(deliver, origin.platform)
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
