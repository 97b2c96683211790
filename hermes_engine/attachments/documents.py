"""The text of a document a person sent, as the model reads it.

Plain text, Markdown, CSV, JSON, PDF (pypdf) and DOCX (python-docx) are read; anything else stays a name,
type and size in the message. What is read is capped: `MAX_DOCUMENT_CHARS` a document and
`MAX_MESSAGE_CHARS` for all documents of one message, long lines broken at `MAX_LINE_CHARS`; a note after the text
says how much was left out, and the `read_document` tool (`pages.py`) reads on from an offset, part by part,
as `web_fetch` pages a long page (the file itself stays where the adapter stored it). Bytes that are not valid
text become U+FFFD, control characters are dropped, and the text is marked untrusted like a web page: the
person chose to send it but did not write it. A document that cannot be read (a corrupt PDF, a password,
a scan without a text layer) is one sentence to the model, and the turn goes on.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from hermes_engine.attachments.blobs import local_path
from hermes_engine.policy.untrusted import mark
from hermes_engine.ports.inbound import Attachment

log = logging.getLogger(__name__)

MAX_DOCUMENT_CHARS = 20_000  # about 5,000 tokens: a few pages of prose
MAX_MESSAGE_CHARS = 40_000  # all documents of one message together
MAX_LINE_CHARS = 2_000  # a longer line (minified data, a blob) is broken into lines of this length
MAX_DOCX_UNPACKED_BYTES = 200_000_000  # what python-docx would parse, all in memory
_MAX_PRETTY_JSON_BYTES = 200_000  # smaller JSON is re-indented, so its one long line becomes readable lines
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
DOCX_TYPES = frozenset({"application/vnd.openxmlformats-officedocument.wordprocessingml.document"})
TEXT_TYPES = frozenset({"application/json", "application/x-ndjson", "application/csv", "application/x-yaml",
                        "application/yaml", "application/xml"})
TEXT_SUFFIXES = frozenset({".txt", ".text", ".md", ".markdown", ".csv", ".tsv", ".json", ".jsonl", ".log",
                           ".yaml", ".yml", ".xml", ".ini", ".toml", ".rst"})


class Unreadable(Exception):
    """The document could not be read; the message is the reason, in words a person understands."""


@dataclass(frozen=True)
class DocumentText:
    """The part of a document's text the model is shown, and how much of the whole it is."""

    text: str
    whole: bool  # nothing was left out
    total: str  # the whole document's size in words a person reads: "85,312 characters", "12 pages"
    shown: str  # what of it `text` is: "the first 20,000 characters", "pages 1–4"


GONE = "files people send are deleted after the retention period; ask the person to send it again"


def format_of(attachment: Attachment) -> str | None:
    """"text", "pdf" or "docx" for a document whose text can be read, by its type and name; else None."""
    if attachment.kind in ("photo", "voice", "video", "audio") or not attachment.path or attachment.refused_reason:
        return None
    mime = attachment.mime_type.split(";", 1)[0].strip().lower()
    suffix = Path(attachment.file_name).suffix.lower()
    if mime in PDF_TYPES or suffix == ".pdf":
        return "pdf"
    if mime in DOCX_TYPES or suffix == ".docx":
        return "docx"
    if mime.startswith("text/") or mime in TEXT_TYPES or suffix in TEXT_SUFFIXES:
        return "text"
    return None


def read_document(path: str | Path, fmt: str, limit: int = MAX_DOCUMENT_CHARS) -> DocumentText:
    """The first `limit` characters of the document's text. Raises `Unreadable`."""
    readers = {"text": _read_text, "pdf": _read_pdf, "docx": _read_docx}
    try:
        return readers[fmt](Path(path), limit)
    except Unreadable:
        raise
    except FileNotFoundError:  # deleted since it was sent (the attachment retention, /forget)
        raise Unreadable(f"the file is no longer kept ({GONE})") from None
    except OSError as exc:
        raise Unreadable(f"the file could not be opened ({exc.strerror or type(exc).__name__})") from None
    except Exception as exc:  # noqa: BLE001 - the parsers raise many kinds on damaged files: one sentence
        log.info("could not read a %s document %s: %s", fmt, path, exc)
        raise Unreadable(f"the file is damaged or not a valid {fmt.upper()} ({_short(exc)})") from None


def for_model(attachment: Attachment, limit: int = MAX_DOCUMENT_CHARS, *, pager: bool = False) -> str | None:
    """The block the user message carries for this attachment's text (None: not a readable document).
    `pager`: the `read_document` tool is at hand, and the note says how to read on."""
    fmt = format_of(attachment)
    if fmt is None or attachment.path is None:
        return None
    try:
        doc = read_document(local_path(attachment) or attachment.path, fmt, limit)
    except Unreadable as exc:
        return f"[the document {attachment.file_name} could not be read: {exc}]"
    if not doc.text.strip():
        return f"[the document {attachment.file_name} has no text to read{_no_text_hint(fmt)}]"
    block = mark(doc.text, f"the document {attachment.file_name}")
    if doc.whole:
        return block
    if pager:
        return (f"{block}\n[shown: {doc.shown} of {doc.total}; call read_document with "
                f"file_name={attachment.file_name!r} and offset={len(doc.text)} for the rest]")
    return (f"{block}\n[shown: {doc.shown} of {doc.total}; the rest of {attachment.file_name} was left out. "
            "Ask the person which part they need if it matters.]")


DOCUMENTS = "documents"  # the user message's meta: its readable documents, for `read_document`


def readable(attachments: tuple[Attachment, ...]) -> list[dict[str, str]]:
    """The readable documents among `attachments`, as the user message keeps them: name, path, format."""
    return [{"name": a.file_name, "path": a.path, "format": fmt} for a in attachments
            if (fmt := format_of(a)) is not None and a.path is not None]


def documents_for_model(attachments: tuple[Attachment, ...], *, pager: bool = False) -> list[str]:
    """Each readable document's block, within `MAX_MESSAGE_CHARS` for them all."""
    blocks, budget = [], MAX_MESSAGE_CHARS
    for attachment in attachments:
        if format_of(attachment) is None:
            continue
        if budget <= 0:
            how = (f"; call read_document with file_name={attachment.file_name!r} to read it" if pager else "")
            blocks.append(f"[the document {attachment.file_name} was not read: this message's documents "
                          f"already fill the {MAX_MESSAGE_CHARS:,} characters shown at once{how}]")
            continue
        block = for_model(attachment, min(MAX_DOCUMENT_CHARS, budget), pager=pager)
        if block:
            blocks.append(block)
            budget -= len(block)
    return blocks


# ----------------------------------------------------------------------------- formats


def clean_text(text: str) -> str:
    """Text safe to show: control characters dropped (tabs and line ends kept), CRLF made LF, a line longer
    than `MAX_LINE_CHARS` broken into lines of that length (nothing of it lost, so paging reaches all of it)."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    lines = text.split("\n")
    if all(len(line) <= MAX_LINE_CHARS for line in lines):
        return text
    return "\n".join(line[i:i + MAX_LINE_CHARS] for line in lines for i in range(0, max(1, len(line)), MAX_LINE_CHARS))


def decode(data: bytes) -> str:
    """Bytes as text: UTF-8 (or UTF-16 where a byte-order mark says so); undecodable bytes become U+FFFD."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", "replace")
    return data.decode("utf-8-sig", "replace")


def _read_text(path: Path, limit: int) -> DocumentText:
    size = path.stat().st_size
    with path.open("rb") as f:
        data = f.read(limit * 4 + 4)  # at most 4 bytes a character: enough for `limit` characters
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):  # as git and grep tell
        raise Unreadable("it is binary data, not text")
    text = decode(data)
    if size <= _MAX_PRETTY_JSON_BYTES and path.suffix.lower() == ".json":
        text = _pretty_json(text)
    text = clean_text(text)
    whole = size <= len(data) and len(text) <= limit
    total = f"{size:,} bytes" if not whole else f"{len(text):,} characters"
    return DocumentText(text[:limit], whole, total, f"the first {min(limit, len(text)):,} characters")


def _pretty_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=1, ensure_ascii=False)
    except ValueError:
        return text


def _read_pdf(path: Path, limit: int) -> DocumentText:
    from pypdf import PdfReader

    reader = PdfReader(path)
    if reader.is_encrypted and not reader.decrypt(""):
        raise Unreadable("it is protected by a password")
    pages = len(reader.pages)
    parts: list[str] = []
    length = read = 0
    for page in reader.pages:
        text = clean_text(page.extract_text() or "").strip()
        read += 1
        parts.append(text)
        length += len(text) + 2
        if length >= limit:
            break
    text = "\n\n".join(p for p in parts if p)
    whole = read == pages and len(text) <= limit
    shown = f"pages 1–{read}, cut at {limit:,} characters" if len(text) > limit else f"pages 1–{read}"
    return DocumentText(text[:limit], whole, f"{pages} pages", shown)


def _read_docx(path: Path, limit: int) -> DocumentText:
    import zipfile

    import docx

    with zipfile.ZipFile(path) as archive:  # a small file can unpack into gigabytes: looked at first
        if sum(info.file_size for info in archive.infolist()) > MAX_DOCX_UNPACKED_BYTES:
            raise Unreadable(f"it unpacks to more than {MAX_DOCX_UNPACKED_BYTES // 1_000_000} MB")
    document = docx.Document(str(path))
    parts: list[str] = []
    length = 0
    for paragraph in document.paragraphs:
        parts.append(paragraph.text)
        length += len(paragraph.text) + 1
        if length > limit:
            break
    else:
        for table in document.tables:
            for row in table.rows:
                parts.append(" | ".join(cell.text for cell in row.cells))
                length += len(parts[-1]) + 1
    text = clean_text("\n".join(parts)).strip()
    whole = len(text) <= limit and length <= limit
    return DocumentText(text[:limit], whole, "the document" if not whole else f"{len(text):,} characters",
                        f"the first {min(limit, len(text)):,} characters")


def _no_text_hint(fmt: str) -> str:
    return " (a scan or pictures only, without a text layer)" if fmt == "pdf" else ""


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:120]
