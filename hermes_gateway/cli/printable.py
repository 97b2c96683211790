"""Text that people on the platforms chose (names, what they sent), made safe for an operator's terminal."""

from __future__ import annotations


def printable(text: str) -> str:
    """Control characters (escape sequences, bidirectional overrides) shown as escapes, never acted on."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
