"""What a fetched body really is, read from its bytes, whatever its `Content-Type` says.

A server names its own type, and can name it wrong: a PNG served as ``text/html`` would otherwise be
decoded and handed to the model as a page of noise. The body's magic numbers (`filetype`, which knows
images, archives, documents, audio, video, fonts and executables) say what it is; a body they do not
name but that holds NUL bytes is binary too (no page, text or JSON does, unless it is UTF-16 or UTF-32).
An image becomes what a tool can hand the model (`ToolResult.images`, as an MCP server's picture does),
described in a line of text for models that take text only; any other binary is refused by its type.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from hermes_engine.ports.conversation import ImagePart
from hermes_engine.providers.vision import IMAGE_TYPES, MAX_IMAGE_BYTES
from hermes_engine.web.fetch import Fetched

_WIDE_CHARSETS = ("utf-16", "utf-32", "ucs-2", "ucs-4")


@dataclass(frozen=True)
class Image:
    """A fetched image as the model gets it: a line describing it, and the image when it can be shown."""

    description: str
    parts: tuple[ImagePart, ...]


def binary_type(fetched: Fetched) -> str | None:
    """The media type the body's bytes name ("application/octet-stream" for binary they do not name);
    None for text."""
    import filetype

    kind = filetype.guess(fetched.body) if fetched.body else None
    if kind is not None:
        return str(kind.mime)
    wide = (fetched.charset or "").lower().startswith(_WIDE_CHARSETS)
    return "application/octet-stream" if not wide and b"\x00" in fetched.body[:4096] else None


def served_as(fetched: Fetched, real: str) -> str:
    """How the server named a body whose bytes say `real`, when it named it otherwise."""
    if fetched.content_type == real:
        return ""
    return f" (served as {fetched.content_type})" if fetched.content_type else " (served without a type)"


def image(fetched: Fetched, media: str) -> Image:
    """The fetched image: attached when every provider takes its type and size and it was read whole."""
    size = len(fetched.body)
    head = f"[image {media}{served_as(fetched, media)} from {fetched.url}"
    if fetched.truncated:
        return Image(f"{head}, larger than the {size:,} bytes web_fetch reads: not shown]", ())
    if media not in IMAGE_TYPES:
        return Image(f"{head}, {size:,} bytes: a type models do not take, not shown]", ())
    if size > MAX_IMAGE_BYTES:
        return Image(f"{head}, {size:,} bytes: over {MAX_IMAGE_BYTES:,} bytes, not shown]", ())
    part = ImagePart(media, base64.b64encode(fetched.body).decode("ascii"))
    return Image(f"{head}, {size:,} bytes: attached to this result]", (part,))


__all__ = ["Image", "binary_type", "image", "served_as"]
