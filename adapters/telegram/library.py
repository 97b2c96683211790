"""python-telegram-bot, imported without what a bot of this gateway never uses.

At its own import the library loads `cryptography` when it is installed (the MCP SDK's JWT support
installs it), only to decrypt Telegram Passport data, which a bot reads only when it is given a private
key; this gateway never gives one. It also imports httpx (its default transport, unused here: the calls go
through `request.AiohttpRequest`), whose `httpx._main`, the `httpx` command line, loads rich, click and
pygments. Together about 10 MB and a tenth of a second or more of every start, so the library is imported
with both hidden from it: it then marks Passport decryption as unavailable, and httpx leaves its command
line out, as both do when those are not installed. Anything that imports them later gets them as usual.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

_HIDDEN = ("cryptography", "httpx._main")


class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if any(fullname == name or fullname.startswith(name + ".") for name in _HIDDEN):
            raise ModuleNotFoundError(f"No module named {fullname!r} (hidden from python-telegram-bot)",
                                      name=fullname)
        return None


def load() -> None:
    """Import the library once; a no-op when it or what would be hidden from it is loaded already."""
    if "telegram" in sys.modules or any(name in sys.modules for name in (*_HIDDEN, "httpx")):
        return
    hide = _Hide()
    sys.meta_path.insert(0, hide)
    try:
        import telegram  # noqa: F401
    finally:
        sys.meta_path.remove(hide)
