"""Platform adapters and what they share.

Shared, platform-neutral parts (this package's top level): `base` (the adapter ABC and capability flags),
`outbound` (per-chat scheduler), `streaming` (edit-in-place replies), `splitting` (limit-aware splitting
that keeps code fences intact), `render` (final Markdown renderers). Platform adapters live in their own
modules (`telegram`, `slack`, `discord`, `console`) and import their SDK there, never here.
"""

from adapters.base import PlatformAdapter
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

__all__ = [
    "Capabilities", "DISCORD", "DROPPED", "InMemoryDeliveryLedger", "OutboundScheduler",
    "OutPart", "PlatformAdapter", "Rendered", "SentMessage", "SLACK", "StreamingReply", "TELEGRAM",
    "measure", "render_discord", "render_plain", "render_slack", "render_telegram", "split_message",
]
