"""A server's answer as the model reads it: marked as untrusted data, images and links described,
cut to the server's size cap with a note saying how to read on (`mcp_result_page`); the caller marks it
as untrusted data (`policy/untrusted.py`)."""

from __future__ import annotations

import base64
import binascii
import itertools
from collections import OrderedDict

from hermes_engine.mcp.remote import RemoteResult

KEPT_RESULTS = 32  # full texts of cut results kept for `mcp_result_page`, per gateway


def _image_note(data: str, mime: str) -> str:
    try:
        size = len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        size = len(data)
    return f"[image {mime or 'of unknown type'}, {size:,} bytes: images from tools are not shown to the model]"


def render(result: RemoteResult) -> str:
    pieces = []
    for part in result.parts:
        if part.kind == "text":
            pieces.append(part.text)
        elif part.kind == "image":
            pieces.append(_image_note(part.data, part.mime_type))
        else:
            pieces.append(f"[resource {part.text or part.uri}: {part.uri}]")
    return "\n".join(pieces) if pieces else "(no content)"


class ResultPages:
    """The full text of the last few cut results, so the model can read on page by page."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, str] = OrderedDict()
        self._ids = itertools.count(1)

    def cut(self, text: str, limit: int) -> str:
        if len(text) <= limit:
            return text
        ref = f"r{next(self._ids)}"
        self._kept[ref] = text
        while len(self._kept) > KEPT_RESULTS:
            self._kept.popitem(last=False)
        return (f"{text[:limit]}\n[cut: {limit:,} of {len(text):,} characters shown; read on with "
                f"mcp_result_page(ref=\"{ref}\", offset={limit})]")

    def page(self, ref: str, offset: int, limit: int) -> str:
        text = self._kept.get(ref)
        if text is None:
            return f"Error: no kept result {ref!r} (only the last {KEPT_RESULTS} cut results are kept)."
        chunk = text[max(offset, 0): max(offset, 0) + limit]
        end = max(offset, 0) + len(chunk)
        more = f"\n[{end:,} of {len(text):,}; next: offset={end}]" if end < len(text) else "\n[end of result]"
        return chunk + more
