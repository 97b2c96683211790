"""How the access gate reaches a person it let in: "You now have access" goes out through the platform's
outlet, in the person's direct chat (`chat_id`). A failed send is logged and loses nothing else: the
person is served all the same."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from hermes_engine.policy.access import Notify
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import Outlet

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
