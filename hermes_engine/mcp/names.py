"""Tool names every provider accepts (`^[a-zA-Z0-9_-]{1,64}$`), made from `<server>__<tool>`.

A server may declare names with dots, spaces or non-ASCII letters, and two servers may clash after
cleaning; the result must be stable across restarts (history refers to the names), so clashes are
resolved in a fixed order: by server, names that were already valid first, then by name; the first
keeps the name, later ones get a short hash of their original name."""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 64
_BAD = re.compile(r"[^A-Za-z0-9_-]+")


def clean(text: str) -> str:
    return _BAD.sub("_", text).strip("_") or "tool"


def _fit(name: str, suffix: str = "") -> str:
    return name[: MAX_NAME - len(suffix)] + suffix


def tool_names(pairs: list[tuple[str, str]], taken: set[str]) -> dict[tuple[str, str], str]:
    """(server, tool) → the name the model sees; none equal to a name in `taken` or to each other."""
    names: dict[tuple[str, str], str] = {}
    used = set(taken)
    for server, tool in sorted(pairs, key=lambda p: (p[0], clean(p[1]) != p[1], p[1])):
        name = _fit(f"{clean(server)}__{clean(tool)}")
        if name in used:
            digest = hashlib.sha1(f"{server}\0{tool}".encode()).hexdigest()[:6]
            name = _fit(name, f"_{digest}")
        names[(server, tool)] = name
        used.add(name)
    return names
