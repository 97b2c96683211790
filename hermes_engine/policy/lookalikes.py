"""Text as the scan reads it: letters that only look Latin read as the Latin letters, and words spelled out
letter by letter read as words.

An attacker who writes "іgnore prevіous" with Cyrillic і, or "i g n o r e  p r e v i o u s", asks the model
for the same thing as the plain words; matching the rules against this form keeps both from slipping past
them. NFKC (in `security._fold`) already folds full-width and compatibility forms; the lookalikes are Unicode's
confusables table (UTS #39) as the `confusable-homoglyphs` package ships it, narrowed to characters that look
like one ASCII letter or digit, so accented letters, other scripts' punctuation and emoji stay as written.
"""

from __future__ import annotations

import functools
import re

# Four or more single letters, each followed by the same single separator ("i g n o r e", "i.g.n.o.r.e"):
# a word spelled out. A longer gap between such runs ("i g n o r e  p r e v i o u s") keeps them two words.
_SPELLED = re.compile(r"(?<![^\W\d_])(?:[^\W\d_]( |\.|-|\*|_)(?=[^\W\d_]))(?:[^\W\d_]\1(?=[^\W\d_])){2,}"
                      r"[^\W\d_](?![^\W\d_])")


@functools.cache
def _ascii_lookalikes() -> dict[int, str]:
    """Each non-ASCII character the confusables table says looks like a single ASCII letter or digit. The
    table is read at the first scan, not at start: it is about 15 MB, and a bot whose agent writes nothing
    to itself never scans."""
    from confusable_homoglyphs import confusables

    table: dict[int, str] = {}
    for char, homoglyphs in confusables.confusables_data.items():
        if len(char) != 1 or char.isascii():
            continue
        latin = [h["c"] for h in homoglyphs if len(h["c"]) == 1 and h["c"].isascii() and h["c"].isalnum()]
        if latin:
            table[ord(char)] = latin[0]
    return table


def _joined(match: re.Match[str]) -> str:
    return match.group().replace(match.group(1), "")


def unmask(text: str) -> str:
    """`text` with lookalike letters replaced by the ASCII ones they imitate and spelled-out words joined."""
    return _SPELLED.sub(_joined, text.translate(_ascii_lookalikes()))


__all__ = ["unmask"]
