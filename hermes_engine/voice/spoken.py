"""What of an answer is read aloud: its Markdown as plain sentences, up to the profile's character limit.

Code blocks are not read (a voice reading code helps no one; the text message has it), links keep their
words, emphasis and heading marks go. An answer longer than the limit is spoken up to the last sentence end
within it (or the last space, when a sentence runs past the limit): the first part, never nothing.
"""

from __future__ import annotations

import re

__all__ = ["spoken_text"]

_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+")
_MARKS = re.compile(r"(^|\s)#{1,6}\s|[*_`>~|]+", re.MULTILINE)
_SPACE = re.compile(r"[ \t]+")
_SENTENCE_END = re.compile(r"[.!?…](?=\s|$)")


def spoken_text(markdown: str, limit: int) -> str:
    """The words to speak for `markdown`, at most `limit` characters; empty when nothing is speakable."""
    text = _FENCE.sub(" ", markdown)
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub(" ", text)
    text = _MARKS.sub(r"\1", text)
    text = "\n".join(_SPACE.sub(" ", line).strip() for line in text.splitlines())
    text = re.sub(r"\n{2,}", "\n", text).strip()
    if len(text) <= limit:
        return text
    head = text[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] >= limit // 3:
        return head[:ends[-1]].strip()
    cut = head.rfind(" ")
    return (head[:cut] if cut > 0 else head).strip()
