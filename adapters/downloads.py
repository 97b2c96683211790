"""Files people send, fetched for the engine the same way on every platform: one capped, streaming download
into the conversation's attachment folder (``<HERMES_HOME>/attachments/<session>/``, the folder /forget
removes), a file name that cannot escape that folder, and a media type read from the bytes.

- The cap holds twice: a size the platform declares is checked before anything is fetched, and since a
  declared size may be missing or wrong, the stream stops as soon as more than the cap has arrived. Bytes go
  to a hidden temporary file beside the final one and are renamed into place only once complete, so a file
  stopped at the cap (or cut by the network) leaves nothing behind, and a file is never whole in memory. One
  cut by a crash leaves its temporary file; the attachment retention sweep deletes it
  (`hermes_engine/attachments/retention.py`, which also deletes files past the profile's retention).
- A name comes from the sender: path parts, control characters, bidi overrides and other invisible format
  characters are removed, characters file systems reject are replaced, the length is bounded (keeping the
  extension) and an empty result gets a name of its own.
- The type is what the bytes say (`filetype`, the magic numbers), not what the sender or the name claims,
  so a ``.png`` that holds text is not handed to a model as an image. Bytes with no magic number keep a
  declared text type (CSV, JSON and Markdown have none), or are taken as text when they read as UTF-8.
- A file refused for its size is still reported (`Attachment.refused_reason`), so the model knows one was
  sent, and `Fetched.notice` is the one sentence the adapter tells the person.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mimetypes
import os
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import aiohttp

from hermes_engine.attachments.folders import ATTACHMENTS, attachment_folder_name
from hermes_engine.attachments.retention import partial_name
from hermes_engine.ports.inbound import Attachment

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
SNIFF_BYTES = 8 * 1024  # enough for every magic number `filetype` reads
MAX_NAME_BYTES = 120  # of the sanitised name, UTF-8; the stored file adds the message id before it
DEFAULT_LIMIT_MB = 20.0  # Telegram's Bot API download limit, and the default cap of every platform
OCTET_STREAM = "application/octet-stream"
_FORBIDDEN = re.compile(r'[<>:"/\\|?*]')
_SPACES = re.compile(r"\s+")
# Types a file in that family always announces in its first bytes: a claim of one that the bytes do not
# back is not believed.
_MAGIC_FAMILIES = ("image/", "audio/", "video/", "application/pdf", "application/zip")


class TooBig(Exception):
    """More than `limit` bytes: `size` as declared, or as many as had arrived when reading stopped."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} bytes, over the limit of {limit}")
        self.size = size
        self.limit = limit


class Transient(Exception):
    """A download that failed in a way worth another try (the file server's 5xx, the network)."""


class Refused(Exception):
    """The file server refused the download (4xx): asking again will not help."""


@dataclass(frozen=True)
class Saved:
    """A completed download: its size and the first bytes, which tell its type."""

    size: int
    head: bytes


@dataclass(frozen=True)
class Offered:
    """A file a platform says a message carries, before it is fetched."""

    kind: str  # the engine's kind ("photo", "voice", "document", ...); "" lets the bytes decide
    name: str  # as the sender named it (sanitised here)
    url: str
    mime_type: str = ""  # as declared
    size: int | None = None  # as declared; None when the platform does not say
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # e.g. the bot token, never logged


@dataclass(frozen=True)
class Fetched:
    """What the engine is handed for one offered file, and what the person is told when it was refused."""

    attachment: Attachment
    notice: str | None = None


def safe_file_name(name: str, fallback: str = "file") -> str:
    """`name` as a file name that stays in its folder and shows as written: no directory parts, no control,
    bidi or other invisible format characters, nothing a file system refuses, at most `MAX_NAME_BYTES`
    bytes with its extension kept; `fallback` when nothing is left."""
    name = unicodedata.normalize("NFC", name or "")
    name = re.split(r"[/\\]", name)[-1]  # the last path part, on either separator
    name = "".join(" " if unicodedata.category(c) in ("Zl", "Zp") or c in "\t\n\r"
                   else "" if unicodedata.category(c)[0] == "C" else c for c in name)
    name = _SPACES.sub(" ", _FORBIDDEN.sub("_", name)).strip(" .")
    if not name or set(name) <= {"_", "."}:
        return fallback
    return _bounded(name)


def _bounded(name: str) -> str:
    if len(name.encode()) <= MAX_NAME_BYTES:
        return name
    stem, dot, ext = name.rpartition(".")
    if not dot or len(ext.encode()) > 16:
        stem, ext = name, ""
    room = MAX_NAME_BYTES - len(ext.encode()) - (1 if ext else 0)
    cut = stem.encode()[:room].decode(errors="ignore").rstrip(" .") or "file"
    return f"{cut}.{ext}" if ext else cut


def sniff(head: bytes, declared: str, name: str) -> str:
    """The media type of a file whose first bytes are `head`: what its magic numbers name; else the type it
    was declared with (or its name suggests), unless that is a type whose files always name themselves
    (an image that is not one), in which case it is text when it reads as UTF-8 and opaque bytes otherwise."""
    import filetype

    kind = filetype.guess(head) if head else None
    if kind is not None:
        return str(kind.mime)
    claimed = (declared or "").split(";")[0].strip().lower() or (mimetypes.guess_type(name)[0] or "")
    if claimed and not claimed.startswith(_MAGIC_FAMILIES) and claimed != OCTET_STREAM:
        return claimed
    return "text/plain" if _reads_as_text(head) else OCTET_STREAM


def _reads_as_text(head: bytes) -> bool:
    if not head or b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3  # a character cut by the end of `head`
    return True


def kind_of(mime: str) -> str:
    """The engine's kind for a file of this type."""
    family = mime.partition("/")[0]
    return {"image": "photo", "audio": "audio", "video": "video"}.get(family, "document")


def settled_kind(claimed: str, mime: str) -> str:
    """The kind a file is given once its bytes are read: the one claimed (a voice note, a document that
    happens to be an image), unless the bytes are no media at all; the bytes' when none was claimed."""
    real = kind_of(mime)
    return real if not claimed or real == "document" else claimed


def limit_text(limit_mb: float) -> str:
    return f"larger than the {limit_mb:g} MB limit for files"


def too_big_notice(name: str, limit_mb: float) -> str:
    """The one sentence a person is told about a file over the cap."""
    return f"I did not read {name}: it is {limit_text(limit_mb)}."


async def stream_to(http: aiohttp.ClientSession, url: str, path: Path, *, limit: int,
                    headers: Mapping[str, str] | None = None, declared: int | None = None,
                    proxy: str | None = None) -> Saved:
    """Stream `url` into `path` through a temporary file beside it, renamed into place once complete; at
    most `limit` bytes are read. Raises `TooBig` (the partial file deleted), `Refused` or `Transient`."""
    if declared is not None and declared > limit:
        raise TooBig(declared, limit)
    partial = path.with_name(partial_name())
    try:
        saved = await _stream(http, url, partial, limit, headers or {}, proxy)
        await asyncio.to_thread(os.replace, partial, path)
        return saved
    finally:
        with contextlib.suppress(FileNotFoundError):
            await asyncio.to_thread(partial.unlink)


async def _stream(http: aiohttp.ClientSession, url: str, partial: Path, limit: int,
                  headers: Mapping[str, str], proxy: str | None) -> Saved:
    head = bytearray()
    size = 0
    try:
        async with http.get(url, headers=dict(headers), proxy=proxy) as response:
            if response.status != 200:
                failure = f"the file server answered {response.status}"
                raise Transient(failure) if response.status >= 500 or response.status == 429 else Refused(failure)
            stated = response.content_length
            if stated is not None and stated > limit:
                raise TooBig(stated, limit)
            out = await asyncio.to_thread(_open_partial, partial)
            try:
                async for chunk in response.content.iter_chunked(CHUNK):
                    size += len(chunk)
                    if size > limit:
                        raise TooBig(size, limit)
                    if len(head) < SNIFF_BYTES:
                        head += chunk[: SNIFF_BYTES - len(head)]
                    await asyncio.to_thread(out.write, chunk)
            finally:
                await asyncio.to_thread(out.close)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise Transient(f"{type(exc).__name__}: {exc}") from exc
    return Saved(size, bytes(head))


async def _on_disk(path: Path) -> Saved | None:
    """The complete file already at `path`, if there is one."""
    def read() -> Saved | None:
        try:
            with path.open("rb") as f:
                return Saved(os.fstat(f.fileno()).st_size, f.read(SNIFF_BYTES))
        except (FileNotFoundError, IsADirectoryError):
            return None

    return await asyncio.to_thread(read)


def pending(item: Offered) -> Attachment:
    """What the engine records of an offered file before it is fetched (`Attachment.pending`): its declared
    name, type and size, and its URL as `source` (the credentials in `item.headers` are not kept)."""
    name = safe_file_name(item.name, fallback=item.kind or "file")
    mime = (item.mime_type or mimetypes.guess_type(name)[0] or OCTET_STREAM).split(";")[0].strip()
    return Attachment(item.kind, name, mime, int(item.size or 0), source=item.url)


def _open_partial(partial: Path) -> BinaryIO:
    """The temporary file, its folder made first (again if the retention sweep just removed it empty)."""
    partial.parent.mkdir(parents=True, exist_ok=True)
    return partial.open("xb")


class Downloads:
    """One platform's downloads into the attachment folders under `home`."""

    def __init__(self, home: Path, *, limit_mb: float = DEFAULT_LIMIT_MB, connect_timeout: float = 10.0,
                 read_timeout: float = 30.0, attempts: int = 3, backoff: float = 0.5,
                 proxy_for: Callable[[str], str | None] | None = None) -> None:
        """`proxy_for`: the proxy for a URL, for a platform that chooses its own (then the environment's
        proxy variables are not read); without it aiohttp reads them."""
        self.root = Path(home) / ATTACHMENTS
        self.limit_mb = limit_mb
        self.attempts = attempts
        self.backoff = backoff
        self.proxy_for = proxy_for
        self.timeout = aiohttp.ClientTimeout(sock_connect=connect_timeout, sock_read=read_timeout)

    @property
    def limit_bytes(self) -> int:
        return int(self.limit_mb * 1024 * 1024)

    def folder(self, session_key: str) -> Path:
        """The conversation's attachment folder: the one /forget removes with the conversation."""
        return self.root / attachment_folder_name(session_key)

    def destination(self, session_key: str, message_id: str, name: str) -> Path:
        """``<message_id>-<name>`` in the conversation's folder; a second file of the same name in one
        message gets a number, so neither overwrites the other."""
        folder = self.folder(session_key)
        prefix = attachment_folder_name(message_id) or "message"
        path = folder / f"{prefix}-{name}"
        n = 1
        while path.exists():
            path = folder / f"{prefix}-{n}-{name}"
            n += 1
        return path

    def destination_of(self, session_key: str, message_id: str, index: int, name: str) -> Path:
        """Where a message's file named `name` goes, the same path each time it is asked for (so a file fetched
        before a crash is found there): ``<message_id>-<name>``, or ``<message_id>-<index>-<name>`` for the
        `index`-th other file of that name in the message."""
        prefix = attachment_folder_name(message_id) or "message"
        return self.folder(session_key) / (f"{prefix}-{name}" if index == 0 else f"{prefix}-{index}-{name}")

    async def fetch_all(self, offered: list[Offered], session_key: str, message_id: str, *,
                        found_on_disk: bool = False) -> list[Fetched]:
        """Each offered file, one after the other (a message carries a few; memory stays at one chunk).
        `found_on_disk`: each at its own `destination_of`, and one already there (fetched whole before a
        crash: a file is renamed into place only once complete) is taken as it is, not fetched again."""
        if not offered:
            return []
        names = [safe_file_name(item.name, fallback=item.kind or "file") for item in offered]
        async with aiohttp.ClientSession(timeout=self.timeout, trust_env=self.proxy_for is None) as http:
            return [await self.fetch(http, item, session_key, message_id,
                                     index=names[:n].count(names[n]) if found_on_disk else None)
                    for n, item in enumerate(offered)]

    async def fetch(self, http: aiohttp.ClientSession, item: Offered, session_key: str,
                    message_id: str, *, index: int | None = None) -> Fetched:
        """One offered file; `index`: at `destination_of` with this index (see `fetch_all`)."""
        name = safe_file_name(item.name, fallback=item.kind or "file")
        declared_mime = (item.mime_type or mimetypes.guess_type(name)[0] or OCTET_STREAM).split(";")[0].strip()
        kind = item.kind or kind_of(declared_mime)
        size = int(item.size or 0)
        path = (self.destination(session_key, message_id, name) if index is None
                else self.destination_of(session_key, message_id, index, name))
        try:
            saved = await _on_disk(path) if index is not None else None
            if saved is not None:
                log.info("%s of message %s was fetched before: not fetched again", name, message_id)
            else:
                saved = await self._with_retries(http, item, path)
        except TooBig as exc:
            log.info("refused a %s (%s): %d bytes or more, over the limit of %d", kind, name, exc.size, exc.limit)
            return Fetched(Attachment(kind, name, declared_mime, exc.size, None, limit_text(self.limit_mb)),
                           too_big_notice(name, self.limit_mb))
        except (Refused, Transient) as exc:
            log.warning("could not download a %s (%s): %s", kind, name, exc)
            return Fetched(Attachment(kind, name, declared_mime, size, None, "could not be downloaded"))
        mime = sniff(saved.head, declared_mime, name)
        if mime != declared_mime:
            log.info("%s was sent as %s; its bytes say %s", name, declared_mime, mime)
        return Fetched(Attachment(settled_kind(item.kind, mime), name, mime, saved.size, str(path)))

    async def _with_retries(self, http: aiohttp.ClientSession, item: Offered, path: Path) -> Saved:
        for attempt in range(self.attempts):
            try:
                return await stream_to(http, item.url, path, limit=self.limit_bytes, headers=item.headers,
                                       declared=item.size,
                                       proxy=self.proxy_for(item.url) if self.proxy_for else None)
            except Transient:
                if attempt == self.attempts - 1:
                    raise
                await asyncio.sleep(self.backoff * 2 ** attempt)
        raise AssertionError("unreachable")


__all__ = ["DEFAULT_LIMIT_MB", "Downloads", "Fetched", "Offered", "Refused", "Saved", "TooBig", "Transient",
           "kind_of", "limit_text", "pending", "safe_file_name", "settled_kind", "sniff", "stream_to", "too_big_notice"]
