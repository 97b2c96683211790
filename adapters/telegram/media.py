"""Files people send (photos, voice notes, audio, video, documents), fetched so the model can be told
about them: saved under ``<HERMES_HOME>/attachments/<session>/`` and described in the message.

A file over ``max_file_mb`` is not downloaded but still described, with the reason, so the model can
answer "that is too big" instead of acting as if nothing was sent. A failed download is described the
same way and never loses the message it came with. The limit holds for the bytes that arrive, not only
for the size Telegram states (which it may leave out): a download stops as soon as it passes the limit.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import re
from pathlib import Path
from typing import Any

from adapters.telegram.options import TelegramOptions
from hermes_engine.ports.inbound import Attachment

log = logging.getLogger(__package__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_CHUNK = 64 * 1024


class FileTooBig(Exception):
    """The file is larger than the limit: `size` bytes as stated, or as many as arrived before reading stopped."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


class _Transient(Exception):
    """A download that failed in a way worth another try (the file server's 5xx, the network)."""


def has_media(message: Any) -> bool:
    return bool(message.photo or message.document or message.voice or message.audio or message.video
                or message.video_note)


def safe_name(name: str) -> str:
    """A file or folder name that cannot climb out of the attachments folder or upset a file system."""
    return _UNSAFE.sub("_", name).strip("._")[:120]


class AttachmentFetcher:
    def __init__(self, bot: Any, home: Path, options: TelegramOptions) -> None:
        self.bot = bot
        self.root = Path(home) / "attachments"
        self.options = options

    @property
    def limit_bytes(self) -> int:
        return int(self.options.max_file_mb * 1024 * 1024)

    def _too_big(self) -> str:
        return f"larger than the {self.options.max_file_mb:g} MB limit for files"

    async def fetch(self, message: Any, session_key: str, message_id: str) -> tuple[Attachment, ...]:
        """The message's files, downloaded into the session's folder as ``<message_id>-<name>``."""
        found = self._found(message)
        if not found:
            return ()
        folder = self.root / safe_name(session_key)
        out = []
        for kind, obj, name, mime in found:
            size = int(obj.file_size or 0)
            name = safe_name(Path(name).name) or kind
            if size > self.limit_bytes:
                out.append(Attachment(kind, name, mime, size, None, self._too_big()))
                continue
            path = folder / f"{message_id}-{name}"
            try:
                size = await self._download(obj.file_id, path)
            except FileTooBig as exc:
                log.info("refused a Telegram %s (%s): %d bytes or more, over the limit", kind, name, exc.size)
                out.append(Attachment(kind, name, mime, exc.size, None, self._too_big()))
                continue
            except Exception as exc:  # noqa: BLE001 - describe the failure to the model, keep the message
                text = str(exc)
                log.warning("could not download a Telegram %s (%s): %s", kind, name, text)
                reason = self._too_big() if "too big" in text.lower() else "could not be downloaded"
                out.append(Attachment(kind, name, mime, size, None, reason))
                continue
            out.append(Attachment(kind, name, mime, size, str(path)))
        return tuple(out)

    def _found(self, message: Any) -> list[tuple[str, Any, str, str]]:
        """(kind, file object, file name, mime type) for each file in the message."""
        found: list[tuple[str, Any, str, str]] = []
        if message.photo:  # several sizes of one photo: the largest that may be downloaded
            fitting = [p for p in message.photo if (p.file_size or 0) <= self.limit_bytes]
            photo = fitting[-1] if fitting else message.photo[-1]
            found.append(("photo", photo, f"photo_{photo.file_unique_id}.jpg", "image/jpeg"))
        for kind, obj, default_mime in (("document", message.document, "application/octet-stream"),
                                        ("voice", message.voice, "audio/ogg"),
                                        ("audio", message.audio, "audio/mpeg"),
                                        ("video", message.video, "video/mp4"),
                                        ("video", message.video_note, "video/mp4")):
            if obj is None:
                continue
            mime = getattr(obj, "mime_type", None) or default_mime
            name = getattr(obj, "file_name", None) or f"{kind}_{obj.file_unique_id}{_extension(mime)}"
            found.append((kind, obj, name, mime))
        return found

    async def _download(self, file_id: str, path: Path) -> int:
        from telegram.error import BadRequest, NetworkError

        await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
        for attempt in range(3):
            try:
                file = await self.bot.get_file(file_id)
                return await self._save(file, path)
            except (BadRequest, FileTooBig):
                raise  # e.g. "file is too big": asking again will not help
            except (NetworkError, _Transient):
                if attempt == 2:
                    raise
                await asyncio.sleep(0.5 * 2 ** attempt)
        raise AssertionError("unreachable")

    async def _save(self, file: Any, path: Path) -> int:
        """Write the file to `path` and return its size, refusing it once it is known to pass the limit."""
        limit = self.limit_bytes
        if (file.file_size or 0) > limit:
            raise FileTooBig(file.file_size)
        source = str(file.file_path or "")
        if not source.startswith(("http://", "https://")):  # a local Bot API server hands out its own path
            size = (await asyncio.to_thread(Path(source).stat)).st_size
            if size > limit:
                raise FileTooBig(size)
            await file.download_to_drive(custom_path=path)
            return size
        data = await self._read_capped(source, limit)
        await asyncio.to_thread(path.write_bytes, data)
        return len(data)

    async def _read_capped(self, url: str, limit: int) -> bytes:
        """The bytes at `url`, read no further than `limit`."""
        import aiohttp

        timeout = aiohttp.ClientTimeout(sock_connect=self.options.connect_timeout,
                                        sock_read=self.options.read_timeout)
        data = bytearray()
        log.debug("downloading %s (at most %d bytes)", url, limit)  # the token in the URL is redacted by the log filter
        try:
            async with aiohttp.ClientSession(timeout=timeout, trust_env=True) as http, http.get(url) as response:
                if response.status != 200:
                    failure = f"the file server answered {response.status}"
                    raise _Transient(failure) if response.status >= 500 else RuntimeError(failure)
                stated = response.content_length or 0
                if stated > limit:
                    raise FileTooBig(stated)
                async for chunk in response.content.iter_chunked(_CHUNK):
                    data += chunk
                    if len(data) > limit:
                        raise FileTooBig(max(stated, len(data)))
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _Transient(f"{type(exc).__name__}: {exc}") from exc
        return bytes(data)


def _extension(mime: str) -> str:
    return {"audio/ogg": ".ogg", "video/mp4": ".mp4", "audio/mpeg": ".mp3", "image/jpeg": ".jpg"}.get(
        mime, mimetypes.guess_extension(mime) or "")
