"""What a Telegram chat shows for a message the Bot API was sent: the text after its formatting is parsed.

`read(text, parse_mode, entities)` returns the text a person reads and its entities, or raises `CantParse`
with the description the Bot API answers (``Bad Request: can't parse entities: …``, HTTP 400). The rules
are the Bot API's documented formatting options, with the parsing details of Telegram's own parser (TDLib,
``parse_html``):

- No parse mode: the text is shown as sent; entities must be of a known type and lie inside the text
  (offsets and lengths in UTF-16 code units), a ``text_link`` needs its ``url``.
- HTML: only the tags ``b strong i em u ins s strike del span tg-spoiler a tg-emoji code pre blockquote``
  are accepted. Any other tag, an unclosed or unmatched one, or a ``<`` that starts no tag (``a < b``) is an
  error, never dropped. ``&lt; &gt; &amp; &quot;`` and numeric references (``&#60;``, ``&#x3c;``) are
  decoded, the semicolon optional; any other ``&`` is shown as it is. Attribute values are quoted strings
  or name tokens; ``span`` needs ``class="tg-spoiler"``; ``blockquote`` may be ``expandable``.
- MarkdownV2: a light check (reserved characters outside entities must be escaped, marks must pair).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["CantParse", "read", "utf16_len"]

ENTITY_TYPES = frozenset({"mention", "hashtag", "cashtag", "bot_command", "url", "email", "phone_number", "bold",
                          "italic", "underline", "strikethrough", "spoiler", "blockquote", "expandable_blockquote",
                          "code", "pre", "text_link", "text_mention", "custom_emoji"})
HTML_TAGS = frozenset({"a", "b", "strong", "i", "em", "s", "strike", "del", "u", "ins", "tg-spoiler", "tg-emoji",
                       "span", "pre", "code", "blockquote"})
_TAG_ENTITY = {"b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline", "ins": "underline",
               "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough", "tg-spoiler": "spoiler",
               "span": "spoiler", "a": "text_link", "code": "code", "pre": "pre", "blockquote": "blockquote",
               "tg-emoji": "custom_emoji"}
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_MD2_RESERVED = frozenset("_*[]()~`>#+-=|{}.!")


class CantParse(Exception):
    """The Bot API's 400 answer to formatting it cannot parse; `str()` is its description."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"can't parse entities: {problem}")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def read(text: str, parse_mode: str | None, entities: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The displayed text and entities of a message sent with `text`, `parse_mode` and `entities`."""
    if parse_mode:
        mode = parse_mode.lower()
        if mode == "html":
            return _read_html(text)
        if mode == "markdownv2":
            return _read_markdown_v2(text), []
        if mode == "markdown":
            return text.replace("*", "").replace("_", "").replace("`", ""), []
        raise CantParse(f"unsupported parse_mode {parse_mode!r}")
    for entity in entities:
        offset, length = int(entity.get("offset", -1)), int(entity.get("length", 0))
        if entity.get("type") not in ENTITY_TYPES:
            raise CantParse(f"unsupported entity type {entity.get('type')!r}")
        if offset < 0 or length <= 0 or offset + length > utf16_len(text):
            raise CantParse(f"entity at offset {offset} is out of bounds")
        if entity["type"] == "text_link" and not entity.get("url"):
            raise CantParse("text_link entity needs a url")
    return text, list(entities)


# -- HTML ------------------------------------------------------------------------------------------------

def _reference(text: str, i: int) -> tuple[str, int] | None:
    """The character an ``&`` reference at `i` stands for and where it ends, if Telegram decodes it."""
    if text.startswith("&#", i):
        j = i + 2
        hexadecimal = text.startswith("x", j)
        j += hexadecimal
        digits = re.match(r"[0-9a-fA-F]*" if hexadecimal else r"[0-9]*", text[j:])
        j += len(digits.group()) if digits else 0
        value = int(digits.group(), 16 if hexadecimal else 10) if digits and digits.group() else 0
        if value == 0 or value >= 0x10FFFF or j - i >= 10:
            return None
        char = chr(value)
    else:
        name = re.match(r"[A-Za-z]*", text[i + 1:])
        j = i + 1 + len(name.group()) if name else i + 1
        if not name or name.group() not in _NAMED:
            return None
        char = _NAMED[name.group()]
    return char, j + 1 if text.startswith(";", j) else j


def _read_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    out: list[str] = []
    entities: list[dict[str, Any]] = []
    opened: list[tuple[str, str, int, int]] = []  # (tag, argument, utf-16 offset, index in the text shown)
    i = 0
    while i < len(text):
        char = text[i]
        if char == "&" and (reference := _reference(text, i)) is not None:
            out.append(reference[0])
            i = reference[1]
            continue
        if char != "<":
            out.append(char)
            i += 1
            continue
        begin = i
        if text.startswith("</", i):
            i = _close_tag(text, i, begin, opened, entities, "".join(out))
        else:
            tag, argument, i = _open_tag(text, i + 1, begin)
            shown = "".join(out)
            opened.append((tag, argument, utf16_len(shown), len(shown)))
    if opened:
        raise CantParse(f'Can\'t find end tag corresponding to start tag "{opened[-1][0]}"')
    for entity in entities:
        if entity["type"] == "code":
            entity.pop("language", None)  # a language belongs to a pre
    return "".join(out), sorted(entities, key=lambda e: (e["offset"], -e["length"]))


def _open_tag(text: str, i: int, begin: int) -> tuple[str, str, int]:
    start = i
    while i < len(text) and not text[i].isspace() and text[i] != ">":
        i += 1
    if i >= len(text):
        raise CantParse(f"Unclosed start tag at byte offset {_bytes(text, begin)}")
    tag = text[start:i].lower()
    if tag not in HTML_TAGS:
        raise CantParse(f'Unsupported start tag "{tag}" at byte offset {_bytes(text, begin)}')
    argument = ""
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            raise CantParse(f"Unclosed start tag at byte offset {_bytes(text, begin)}")
        if text[i] == ">":
            break
        name_start = i
        while i < len(text) and not text[i].isspace() and text[i] not in "=>":
            i += 1
        name = text[name_start:i]
        if tag == "blockquote" and name == "expandable" and not text[i:].lstrip().startswith("="):
            argument = "expandable"
            continue
        while i < len(text) and text[i].isspace():
            i += 1
        if not text.startswith("=", i):
            raise CantParse(f'Expected equal sign in declaration of an attribute of the tag "{tag}" at byte '
                            f"offset {_bytes(text, begin)}")
        i += 1
        while i < len(text) and text[i].isspace():
            i += 1
        value, i = _attribute_value(text, i, begin)
        if tag == "a" and name == "href" or tag == "tg-emoji" and name == "emoji-id":
            argument = value
        elif tag == "code" and name == "class" and value.startswith("language-"):
            argument = value[len("language-"):]
        elif tag == "span" and name == "class" and value.startswith("tg-"):
            argument = value[len("tg-"):]
    if tag == "span" and argument != "spoiler":
        raise CantParse(f'Tag "span" must have class "tg-spoiler" at byte offset {_bytes(text, begin)}')
    return tag, argument, i + 1


def _attribute_value(text: str, i: int, begin: int) -> tuple[str, int]:
    if i >= len(text):
        raise CantParse(f"Unclosed start tag at byte offset {_bytes(text, begin)}")
    if text[i] not in "'\"":
        token = re.match(r"[A-Za-z0-9.-]*", text[i:])
        end = i + (len(token.group()) if token else 0)
        if end < len(text) and not text[end].isspace() and text[end] != ">":
            raise CantParse(f"Unexpected end of name token at byte offset {_bytes(text, i)}")
        return text[i:end].lower(), end
    quote, i = text[i], i + 1
    value: list[str] = []
    while i < len(text) and text[i] != quote:
        if text[i] == "&" and (reference := _reference(text, i)) is not None:
            value.append(reference[0])
            i = reference[1]
            continue
        value.append(text[i])
        i += 1
    if i >= len(text):
        raise CantParse(f"Unclosed start tag at byte offset {_bytes(text, begin)}")
    return "".join(value), i + 1


def _close_tag(text: str, i: int, begin: int, opened: list[tuple[str, str, int, int]],
               entities: list[dict[str, Any]], shown: str) -> int:
    if not opened:
        raise CantParse(f"Unexpected end tag at byte offset {_bytes(text, begin)}")
    end = text.find(">", i)
    name = text[i + 2:end if end >= 0 else len(text)].strip().lower()
    if end < 0 or " " in name:
        raise CantParse(f"Unclosed end tag at byte offset {_bytes(text, begin)}")
    tag, argument, offset, start = opened.pop()
    if name and name != tag:
        raise CantParse(f'Unmatched end tag at byte offset {_bytes(text, begin)}, expected "</{tag}>", found '
                        f'"</{name}>"')
    length = utf16_len(shown) - offset
    if length > 0:
        entity: dict[str, Any] = {"type": _TAG_ENTITY[tag], "offset": offset, "length": length}
        if tag == "a":
            entity["url"] = argument or shown[start:]
        elif tag in ("pre", "code") and entities and {entities[-1]["type"], tag} == {"pre", "code"} and (
                entities[-1]["offset"], entities[-1]["length"]) == (offset, length):
            inner = entities.pop()  # <pre><code class="language-x">: one pre entity with its language
            language = inner.get("language") if tag == "pre" else argument
            entity = {"type": "pre", "offset": offset, "length": length, **({"language": language} if language else {})}
        elif tag == "code" and argument:
            entity["language"] = argument
        elif tag == "blockquote" and argument:
            entity["type"] = "expandable_blockquote"
        elif tag == "tg-emoji":
            if not argument.isdigit() or int(argument) == 0:
                raise CantParse("Invalid custom emoji identifier specified")
            entity["custom_emoji_id"] = argument
        entities.append(entity)
    return end + 1


def _bytes(text: str, i: int) -> int:
    return len(text[:i].encode("utf-8"))


# -- MarkdownV2 (light) ------------------------------------------------------------------------------------

def _read_markdown_v2(text: str) -> str:
    out: list[str] = []
    open_marks: list[str] = []
    i = 0
    in_code = False
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        if text.startswith("```", i):
            in_code = not in_code
            i += 3
            continue
        if char == "`":
            in_code = not in_code
            i += 1
            continue
        if in_code:
            out.append(char)
            i += 1
            continue
        if char in "*_~|":
            mark = "||" if text.startswith("||", i) else ("__" if text.startswith("__", i) else char)
            if open_marks and open_marks[-1] == mark:
                open_marks.pop()
            else:
                open_marks.append(mark)
            i += len(mark)
            continue
        if char in _MD2_RESERVED:
            raise CantParse(f"Character '{char}' is reserved and must be escaped with the preceding '\\'")
        out.append(char)
        i += 1
    if open_marks or in_code:
        raise CantParse("Can't find end of the entity starting at byte offset 0")
    return "".join(out)
