"""What the tests of files people send share: a real screenshot's bytes, and what the model was sent."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any


def png(width: int = 4, height: int = 3) -> bytes:
    """A valid PNG (grey pixels), as a screenshot tool writes one."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def sent_images(request: Any) -> list[str]:
    """The data URLs of the images in the newest user message of a chat-completions request."""
    content = [m for m in request.messages if m["role"] == "user"][-1]["content"]
    if not isinstance(content, list):
        return []
    return [part["image_url"]["url"] for part in content
            if isinstance(part, dict) and part.get("type") == "image_url"]


def kept_files(home: Path) -> list[Path]:
    """Every file under the attachment folders, temporary ones included."""
    root = home / "attachments"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
