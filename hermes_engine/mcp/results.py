"""A server's answer as the model reads it: text, links described, images described in the text and
handed on as images (vision models see them; `MAX_IMAGES` per result, each up to `MAX_IMAGE_BYTES`, the
rest only described), cut to the server's size cap with a note saying how to read on (`mcp_result_page`);
the caller marks the text, and every page of it, as untrusted data (`policy/untrusted.py`).

A cut result can hold what only its session's people may see (an admins-only server's answer), so its
rest is kept for that session alone, under a ref nobody can guess."""

from __future__ import annotations

import base64
import binascii
import secrets
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

from hermes_engine.mcp.remote import RemotePart, RemoteResult
from hermes_engine.ports.conversation import ImagePart
from hermes_engine.providers.vision import IMAGE_TYPES, MAX_IMAGE_BYTES

KEPT_RESULTS = 32  # full texts of cut results kept for `mcp_result_page`, per gateway
MAX_IMAGES = 4  # per result: each costs over a thousand tokens on every later request of the session


def _size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def _image(part: RemotePart, shown: list[ImagePart]) -> str:
    """The image's line in the text; the image itself joins `shown` when it can be shown."""
    size = _size(part.data)
    kind = part.mime_type or "of unknown type"
    if size is None:
        return f"[image {kind}: not valid base64, not shown]"
    if part.mime_type not in IMAGE_TYPES:
        return f"[image {kind}, {size:,} bytes: a type models do not take, not shown]"
    if size > MAX_IMAGE_BYTES:
        return f"[image {kind}, {size:,} bytes: over {MAX_IMAGE_BYTES:,} bytes, not shown]"
    if len(shown) >= MAX_IMAGES:
        return f"[image {kind}, {size:,} bytes: only {MAX_IMAGES} images per result are shown]"
    shown.append(ImagePart(part.mime_type, part.data))
    return f"[image {kind}, {size:,} bytes: image {len(shown)} attached to this result]"


def render(result: RemoteResult) -> tuple[str, tuple[ImagePart, ...]]:
    """The text the model reads, and the images attached to it."""
    pieces = []
    shown: list[ImagePart] = []
    for part in result.parts:
        if part.kind == "text":
            pieces.append(part.text)
        elif part.kind == "image":
            pieces.append(_image(part, shown))
        else:
            pieces.append(f"[resource {part.text or part.uri}: {part.uri}]")
    return ("\n".join(pieces) if pieces else "(no content)"), tuple(shown)


@dataclass(frozen=True)
class KeptResult:
    owner: Hashable  # the session whose tool call produced it
    server: str
    source: str  # as the untrusted marker names it
    text: str

    def page(self, offset: int, limit: int) -> str:
        start = max(offset, 0)
        chunk = self.text[start: start + limit]
        end = start + len(chunk)
        more = f"\n[{end:,} of {len(self.text):,}; next: offset={end}]" if end < len(self.text) else "\n[end of result]"
        return chunk + more


class ResultPages:
    """The full text of the last few cut results, so the model can read on page by page."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, KeptResult] = OrderedDict()

    def cut(self, text: str, limit: int, *, owner: Hashable, server: str, source: str) -> str:
        if len(text) <= limit:
            return text
        ref = secrets.token_hex(8)
        self._kept[ref] = KeptResult(owner, server, source, text)
        while len(self._kept) > KEPT_RESULTS:
            self._kept.popitem(last=False)
        return (f"{text[:limit]}\n[cut: {limit:,} of {len(text):,} characters shown; read on with "
                f"mcp_result_page(ref=\"{ref}\", offset={limit})]")

    def find(self, ref: str, owner: Hashable) -> KeptResult | None:
        """None alike for a ref never kept, one dropped, and another session's: that one learns nothing."""
        kept = self._kept.get(ref)
        return kept if kept is not None and kept.owner == owner else None
