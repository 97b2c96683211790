"""Platform adapters and what they share.

Shared, platform-neutral parts (this package's top level): `base` (the adapter ABC: lifecycle, elections,
the engine's `Outlet`), `transport` (what a platform gives: its `Transport`), `delivery` (`Outbound`, composed
around it), `outbound` (the per-chat pacer), `ledger` (at most once per key), `part_rendering` (finals cut
to fit once rendered), `streaming` (edit-in-place replies), `splitting` (limit-aware splitting that keeps
code fences intact), `render` (final Markdown renderers). Platform adapters live in their own
modules (`telegram`, `slack`, `discord`, `console`) and import their SDK there, never here.
"""

from adapters.base import PlatformAdapter
from adapters.delivery import Lanes, Outbound
from adapters.outbound import DROPPED, OutboundScheduler
from adapters.parts import (
    DISCORD,
    SLACK,
    TELEGRAM,
    Capabilities,
    InMemoryDeliveryLedger,
    OutPart,
    SentMessage,
)
from adapters.render import Rendered, render_discord, render_plain, render_slack, render_telegram
from adapters.splitting import measure, split_message
from adapters.streaming import StreamingReply
from adapters.transport import NativeStream, Transport

__all__ = [
    "Capabilities", "DISCORD", "DROPPED", "InMemoryDeliveryLedger", "Lanes", "NativeStream", "Outbound",
    "OutboundScheduler", "OutPart", "PlatformAdapter", "Rendered", "SentMessage", "SLACK", "StreamingReply",
    "TELEGRAM", "Transport",
    "measure", "render_discord", "render_plain", "render_slack", "render_telegram", "split_message",
]
