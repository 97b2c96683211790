"""A final answer cut into messages that each fit the platform once rendered.

The Markdown is split with headroom first, then each part rendered; a part whose rendering still
outgrows the limit (entities, escapes) is split smaller and rendered again, and one that cannot be
rendered within the limit goes out plain, so no answer is lost to its formatting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from adapters.parts import Capabilities, OutPart
from adapters.render import Rendered
from adapters.splitting import measure, split_message

__all__ = ["PartRenderer", "Renderer"]

log = logging.getLogger(__name__)

Renderer = Callable[[str], "str | Rendered"]


class PartRenderer:
    """Splits and renders finals for one platform's `capabilities` with its `render` function."""

    def __init__(self, render: Renderer, capabilities: Capabilities, *, platform: str = "") -> None:
        self.render = render
        self.capabilities = capabilities
        self.platform = platform

    def measure(self, text: str) -> int:
        return measure(text, self.capabilities.length_unit)

    def parts(self, markdown: str) -> list[OutPart]:
        caps = self.capabilities
        first = max(16, int(caps.max_message_length * caps.render_headroom))
        parts: list[OutPart] = []
        for source in split_message(markdown, first, caps.length_unit):
            parts.extend(self._fitting(source, first, depth=0))
        return parts

    def _fitting(self, source: str, source_limit: int, *, depth: int) -> list[OutPart]:
        limit, unit = self.capabilities.max_message_length, self.capabilities.length_unit
        try:
            rendered = Rendered.of(self.render(source))
        except Exception:  # noqa: BLE001 - a renderer bug must not lose the reply
            log.exception("rendering failed on %s; sending the part as plain text", self.platform)
            return [OutPart(source, None)]
        if not rendered.text.strip():
            return [OutPart(source, None)] if source.strip() else []
        size = self.measure(rendered.text)
        if size <= limit:
            return [OutPart(source, rendered)]
        smaller = min(source_limit - 1, int(source_limit * limit / size * 0.9))
        if depth >= 4 or smaller < 32:
            return [OutPart(p, None) for p in split_message(source, limit, unit)]
        parts: list[OutPart] = []
        for piece in split_message(source, smaller, unit):
            parts.extend(self._fitting(piece, smaller, depth=depth + 1))
        return parts
