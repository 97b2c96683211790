"""Split a long reply into messages that each fit a platform's limit.

`split_message(text, limit, unit)` cuts at the coarsest natural boundary that still fills a message
reasonably (paragraph, then line, then sentence, then word; a hard cut only when a single word is longer
than the room left). It never cuts inside a fenced code block without repairing it: the part that ends
inside a fence gets a closing fence line, and the next part reopens it with the same opener (indentation
and info string, e.g. ```` ```python ````). Every part is at most `limit` long in `unit`:

- ``"chars"``: Python characters (code points) — Slack, Discord.
- ``"utf16"``: UTF-16 code units — Telegram (an emoji outside the BMP counts 2).

Nothing is truncated: apart from the fence lines added at a cut and the whitespace at a cut, the parts
concatenated give back the text. `split_spans` returns the same parts with their source offsets, for
callers (streaming) that need to know where each part came from.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal

Unit = Literal["chars", "utf16"]

__all__ = ["Fence", "Part", "Unit", "find_fences", "measure", "split_message", "split_spans"]

# A part is "well filled" when a cut at this boundary level uses at least this share of the room;
# otherwise the next, finer level is tried (so one short first paragraph does not make a tiny message).
_MIN_FILL = 0.5

_FENCE_OPEN = re.compile(r"^([ \t]*)(`{3,}|~{3,})([^\n]*)$")
_PARAGRAPH = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)*")
_LINE = re.compile(r"\n(?:[ \t]*\n)*")
_SENTENCE = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]*_]*([ \t]+)|[\u3002\uff01\uff1f]()")
_WORD = re.compile(r"[ \t]+")
_LEADING_BLANK_LINES = re.compile(r"(?:[ \t]*\n)*")
_NO_CUT_BEFORE = {"\u200d", "\ufe0e", "\ufe0f", "\u20e3"}


def measure(text: str, unit: Unit = "chars") -> int:
    """Length of `text` as the platform counts it."""
    if unit == "utf16":
        return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2
    if unit == "chars":
        return len(text)
    raise ValueError(f"unknown length unit {unit!r} (expected 'chars' or 'utf16')")


@dataclass(frozen=True)
class Fence:
    """A fenced code block in the source. Offsets index the source string.

    `open_start`..`content_start` is the opener line (with its newline); `close_start`..`close_end` the
    closing line (without its newline). An unclosed fence has `closed=False` and
    `close_start == close_end == len(text)`.
    """

    open_start: int
    content_start: int
    close_start: int
    close_end: int
    opener: str  # the opener line as written, e.g. "  ```python"
    closer: str  # a line that closes it, e.g. "  ```"
    closed: bool


def find_fences(text: str) -> list[Fence]:
    """Fenced code blocks in `text`, in order (CommonMark-like; any indentation is accepted, as models
    indent fences inside list items)."""
    fences: list[Fence] = []
    pos = 0
    n = len(text)
    open_info: tuple[int, int, str, str, str, int] | None = None  # start, content_start, opener, indent, char, len
    while pos <= n:
        nl = text.find("\n", pos)
        line_end = n if nl == -1 else nl
        line = text[pos:line_end]
        next_pos = line_end + 1
        if open_info is None:
            m = _FENCE_OPEN.match(line)
            if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
                open_info = (pos, min(next_pos, n), line, m.group(1), m.group(2)[0], len(m.group(2)))
        else:
            start, content_start, opener, indent, char, length = open_info
            stripped = line.strip()
            if len(stripped) >= length and stripped == char * len(stripped):
                fences.append(Fence(start, content_start, pos, line_end, opener, indent + char * length, True))
                open_info = None
        if nl == -1:
            break
        pos = next_pos
    if open_info is not None:
        start, content_start, opener, indent, char, length = open_info
        fences.append(Fence(start, content_start, n, n, opener, indent + char * length, False))
    return fences


@dataclass(frozen=True)
class Part:
    """One message-sized part. `text == prefix + source[start:end] + suffix`, where prefix/suffix are
    the fence lines added to reopen/close a code block cut at this part's edges."""

    text: str
    start: int
    end: int
    prefix: str = ""
    suffix: str = ""


def split_message(text: str, limit: int, unit: Unit = "chars") -> list[str]:
    """Split `text` into parts of at most `limit` (in `unit`), never truncating.

    Whitespace-only text gives ``[]``. Leading blank lines and trailing whitespace are dropped; a fence
    left unclosed at the end of the text is closed in the last part, so every part is balanced.
    """
    return [part.text for part in split_spans(text, limit, unit)]


def split_spans(text: str, limit: int, unit: Unit = "chars") -> list[Part]:
    """Like `split_message`, with the source span and added fence lines of each part."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    return _Splitter(text, limit, unit).run()


class _Splitter:
    def __init__(self, text: str, limit: int, unit: Unit) -> None:
        measure("", unit)  # validates the unit
        self.text = text
        self.limit = limit
        self.unit = unit
        if unit == "utf16" and not text.isascii():
            self.widths: list[int] | None = [0, *accumulate(2 if ord(c) > 0xFFFF else 1 for c in text)]
        else:
            self.widths = None  # width == index
        self.fences = find_fences(text)
        self.fence_starts = [f.open_start for f in self.fences]

    # -- measuring ------------------------------------------------------------------------------------
    def w(self, i: int) -> int:
        return i if self.widths is None else self.widths[i]

    def span(self, a: int, b: int) -> int:
        return self.w(b) - self.w(a)

    def last_fitting(self, start: int, budget: int, hi: int) -> int:
        """Largest index e in [start, hi] with span(start, e) <= budget."""
        if self.widths is None:
            return min(hi, start + max(budget, 0))
        return min(hi, bisect.bisect_right(self.widths, self.widths[start] + budget, start, hi + 1) - 1)

    # -- fences ---------------------------------------------------------------------------------------
    def fence_spanning(self, pos: int) -> Fence | None:
        """The fence whose lines strictly surround `pos` (open_start < pos < close_end)."""
        i = bisect.bisect_left(self.fence_starts, pos) - 1
        if i >= 0:
            fence = self.fences[i]
            if fence.open_start < pos < fence.close_end or (not fence.closed and pos == fence.close_end
                                                             and pos > fence.open_start):
                return fence
        return None

    def fence_inside(self, pos: int) -> Fence | None:
        """The fence whose content `pos` lies in (a part starting here needs the opener again)."""
        fence = self.fence_spanning(pos)
        if fence is not None and fence.content_start <= pos < fence.close_start:
            return fence
        return None

    def cut_fence(self, e: int, s: int) -> tuple[bool, Fence | None]:
        """Whether a cut (part ends at e, next starts at s) is allowed, and the fence it cuts, if any."""
        fe, fs = self.fence_spanning(e), self.fence_spanning(s)
        if fe is None and fs is None:
            return True, None
        if fe is fs and fe is not None and fe.content_start < e and s < fe.close_start:
            return True, fe
        return False, None

    def fake_fence_at(self, pos: int) -> bool:
        """Whether a part starting at `pos` (mid-line) would begin with what reads as a fence line."""
        return pos > 0 and self.text[pos - 1] != "\n" and self.text.startswith(("```", "~~~"), pos)

    def fences_between(self, start: int, hi: int) -> list[Fence]:
        lo = bisect.bisect_right(self.fence_starts, start)
        up = bisect.bisect_right(self.fence_starts, hi)
        return self.fences[lo:up]

    @staticmethod
    def reopen(fence: Fence) -> str:
        return fence.opener + "\n"

    @staticmethod
    def close(fence: Fence) -> str:
        return "\n" + fence.closer

    # -- the loop -------------------------------------------------------------------------------------
    def run(self) -> list[Part]:
        text = self.text
        leading = _LEADING_BLANK_LINES.match(text)
        start = leading.end() if leading else 0
        end = len(text.rstrip())
        parts: list[Part] = []
        while start < end:
            inside = self.fence_inside(start)
            prefix = self.reopen(inside) if inside else ""
            if inside and measure(prefix + inside.closer, self.unit) + 2 > self.limit:
                prefix = ""  # degenerate limit: cannot afford the fence repair
            prefix_w = measure(prefix, self.unit)
            tail_fence = self.unclosed_fence_before(end)
            tail_suffix = self.close(tail_fence) if tail_fence else ""
            if prefix_w + self.span(start, end) + measure(tail_suffix, self.unit) <= self.limit:
                parts.append(Part(prefix + text[start:end] + tail_suffix, start, end, prefix, tail_suffix))
                break
            e, s, suffix = self.choose_cut(start, end, prefix_w, degrade=not prefix and inside is not None)
            parts.append(Part(prefix + text[start:e] + suffix, start, e, prefix, suffix))
            start = s
        return parts

    def unclosed_fence_before(self, end: int) -> Fence | None:
        if self.fences and not self.fences[-1].closed and self.fences[-1].open_start < end:
            return self.fences[-1]
        return None

    def choose_cut(self, start: int, end: int, prefix_w: int, *, degrade: bool) -> tuple[int, int, str]:
        text = self.text
        budget = self.limit - prefix_w
        hi = self.last_fitting(start, budget, end)
        levels: list[list[tuple[int, int, str]]] = [[], [], [], [], []]  # para, line, code line, sentence, word
        window = text[start:hi]
        first_content = start + len(window) - len(window.lstrip())  # a part must hold some non-space

        def trim(e: int) -> int:
            while e > start and text[e - 1] in " \t":
                e -= 1
            return e

        def consider(level: int, e: int, s: int) -> None:
            if not (start < e <= hi) or s <= start or self.fake_fence_at(s):
                return
            ok, fence = self.cut_fence(e, s)
            if not ok:
                return
            if fence is not None and level in (3, 4):
                e = s  # inside code keep the whitespace: it is content there
                if e > hi:
                    return
            suffix = self.close(fence) if fence is not None else ""
            if fence is not None and level < 2:
                level = 2
            if self.span(start, e) + measure(suffix, self.unit) > budget:
                return
            if e <= first_content:
                return
            levels[level].append((e, s, suffix))

        for m in _PARAGRAPH.finditer(text, start, end):
            if m.start() > hi:
                break
            if self.fence_spanning(m.start()) is None:  # blank lines inside code are code lines
                consider(0, trim(m.start()), m.end())
        for m in _LINE.finditer(text, start, end):
            if m.start() > hi:
                break
            e, s = m.start(), m.end()
            if self.fence_spanning(e) is not None:
                s = e + 1  # blank lines inside code are content
            else:
                e = trim(e)
            consider(1, e, s)
        for m in _SENTENCE.finditer(text, start, end):
            if m.start() > hi:
                break
            group = 1 if m.group(1) is not None else 2
            consider(3, m.start(group), m.end(group))
        for m in _WORD.finditer(text, start, end):
            if m.start() > hi:
                break
            consider(4, m.start(), m.end())

        # A code block that would be cut here but fits whole in a message of its own: start it afresh.
        for fence in self.fences_between(start, hi):
            if fence.close_end > hi and self.span(fence.open_start, fence.close_end) <= self.limit:
                before = [c for c in levels[0] + levels[1] if c[1] == fence.open_start]
                if before:
                    return before[0]
        for level in levels:
            if level:
                best = max(level, key=lambda c: c[0])
                if self.span(start, best[0]) >= _MIN_FILL * budget:
                    return best
        candidates = [c for level in levels for c in level]
        if candidates:
            return max(candidates, key=lambda c: c[0])
        return self.hard_cut(start, hi, budget, degrade=degrade)

    def hard_cut(self, start: int, hi: int, budget: int, *, degrade: bool) -> tuple[int, int, str]:
        """A cut at an arbitrary character (a word longer than the room), not inside a grapheme."""
        text = self.text
        e = hi
        while e > start + 1 and _joins_previous(text, e):
            e -= 1
        if not degrade:
            probe = e
            while probe > start:
                ok, fence = self.cut_fence(probe, probe)
                if ok and not self.fake_fence_at(probe):
                    suffix = self.close(fence) if fence is not None else ""
                    if self.span(start, probe) + measure(suffix, self.unit) <= budget:
                        if probe == e or not _joins_previous(text, probe):
                            return probe, probe, suffix
                probe -= 1
        # No fence-safe cut fits (a limit too small for the fence lines): cut anyway, never lose text.
        return max(e, start + 1), max(e, start + 1), ""


def _joins_previous(text: str, i: int) -> bool:
    """Whether cutting before text[i] would break a user-perceived character."""
    if i <= 0 or i >= len(text):
        return False
    ch, prev = text[i], text[i - 1]
    if ch in _NO_CUT_BEFORE or prev == "\u200d":
        return True
    if 0x1F3FB <= ord(ch) <= 0x1F3FF or 0xE0020 <= ord(ch) <= 0xE007F:  # skin tones, tag sequences
        return True
    if 0x1F1E6 <= ord(ch) <= 0x1F1FF and 0x1F1E6 <= ord(prev) <= 0x1F1FF:
        # regional indicators pair up from the start of their run
        run = 0
        j = i - 1
        while j >= 0 and 0x1F1E6 <= ord(text[j]) <= 0x1F1FF:
            run += 1
            j -= 1
        return run % 2 == 1
    return unicodedata.category(ch) in ("Mn", "Me", "Mc")
