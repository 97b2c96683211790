"""Files people send (photos, voice notes, audio, video, documents), fetched so the model can be told
about them: saved under ``<HERMES_HOME>/attachments/<session>/`` and described in the message.

A file over ``max_file_mb`` is not downloaded but still described, with the reason, so the model can
answer "that is too big" instead of acting as if nothing was sent; the person is told so in one sentence
(`notices`). A failed download is described the same way and never loses the message it came with. The
limit holds for the bytes that arrive, not only for the size Telegram states (which it may leave out): a
download stops as soon as it passes the limit. The download, the file names and the type read from the
bytes are those of every platform (`adapters.downloads`).

Unlike Slack and Discord, which hand their files over pending and fetch them in the turn, Telegram's are
fetched before the handover: an update is confirmed (the next poll's offset, or the webhook's 200) only
once the inbox recorded its message, so a crash in the middle of a download has Telegram send it again.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
from pathlib import Path
from typing import Any

from adapters.downloads import (
    SNIFF_BYTES,
    Downloads,
    Saved,
    TooBig,
    Transient,
    safe_file_name,
    settled_kind,
    sniff,
    stream_to,
    too_big_notice,
)
from adapters.telegram.options import TelegramOptions
from hermes_engine.ports.inbound import Attachment

log = logging.getLogger(__package__)


def has_media(message: Any) -> bool:
    return bool(message.photo or message.document or message.voice or message.audio or message.video
                or message.video_note)


class AttachmentFetcher:
    def __init__(self, bot: Any, home: Path, options: TelegramOptions) -> None:
        self.bot = bot
        self.options = options
        self.downloads = Downloads(home, limit_mb=options.max_file_mb, connect_timeout=options.connect_timeout,
                                   read_timeout=options.read_timeout)

    @property
    def limit_bytes(self) -> int:
        return int(self.options.max_file_mb * 1024 * 1024)

    def _too_big(self) -> str:
        return f"larger than the {self.options.max_file_mb:g} MB limit for files"

    def notices(self, attachments: tuple[Attachment, ...]) -> list[str]:
        """The one sentence a person is told for each file refused for its size (as on Slack and Discord):
        the model hears of it too, but its answer may not say so."""
        return [too_big_notice(a.file_name, self.options.max_file_mb) for a in attachments
                if a.refused_reason == self._too_big()]

    async def fetch(self, message: Any, session_key: str, message_id: str) -> tuple[Attachment, ...]:
        """The message's files, downloaded into the session's folder as ``<message_id>-<name>``."""
        found = self._found(message)
        if not found:
            return ()
        out = []
        for kind, obj, name, mime in found:
            size = int(obj.file_size or 0)
            name = safe_file_name(name, fallback=kind)
            if size > self.limit_bytes:
                out.append(Attachment(kind, name, mime, size, None, self._too_big()))
                continue
            path = self.downloads.destination(session_key, message_id, name)
            try:
                saved = await self._download(obj.file_id, path)
            except TooBig as exc:
                log.info("refused a Telegram %s (%s): %d bytes or more, over the limit", kind, name, exc.size)
                out.append(Attachment(kind, name, mime, exc.size, None, self._too_big()))
                continue
            except Exception as exc:  # noqa: BLE001 - describe the failure to the model, keep the message
                text = str(exc)
                log.warning("could not download a Telegram %s (%s): %s", kind, name, text)
                reason = self._too_big() if "too big" in text.lower() else "could not be downloaded"
                out.append(Attachment(kind, name, mime, size, None, reason))
                continue
            real = sniff(saved.head, mime, name)
            out.append(Attachment(settled_kind(kind, real), name, real, saved.size, str(path)))
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

    async def _download(self, file_id: str, path: Path) -> Saved:
        from telegram.error import BadRequest, NetworkError

        for attempt in range(3):
            try:
                file = await self.bot.get_file(file_id)
                return await self._save(file, path)
            except (BadRequest, TooBig):
                raise  # e.g. "file is too big": asking again will not help
            except (NetworkError, Transient):
                if attempt == 2:
                    raise
                await asyncio.sleep(0.5 * 2 ** attempt)
        raise AssertionError("unreachable")

    async def _save(self, file: Any, path: Path) -> Saved:
        """Write the file to `path`, refusing it once it is known to pass the limit."""
        limit = self.limit_bytes
        if (file.file_size or 0) > limit:
            raise TooBig(file.file_size, limit)
        source = str(file.file_path or "")
        if not source.startswith(("http://", "https://")):  # a local Bot API server hands out its own path
            size = (await asyncio.to_thread(Path(source).stat)).st_size
            if size > limit:
                raise TooBig(size, limit)
            await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
            await file.download_to_drive(custom_path=path)
            return Saved(size, await asyncio.to_thread(_head, path))
        import aiohttp

        # the token in the URL is redacted by the log filter
        log.debug("downloading %s (at most %d bytes)", source, limit)
        async with aiohttp.ClientSession(timeout=self.downloads.timeout, trust_env=True) as http:
            return await stream_to(http, source, path, limit=limit)


def _head(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(SNIFF_BYTES)


def _extension(mime: str) -> str:
    return {"audio/ogg": ".ogg", "video/mp4": ".mp4", "audio/mpeg": ".mp3", "image/jpeg": ".jpg"}.get(
        mime, mimetypes.guess_extension(mime) or "")
