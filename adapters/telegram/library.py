"""python-telegram-bot, imported without Telegram Passport's cryptography.

The library imports `cryptography` at its own import when it is installed (the MCP SDK's JWT support
installs it), only to decrypt Telegram Passport data, which a bot reads only when it is given a private
key; this gateway never gives one. That import is about 8 MB and a tenth of a second of every start, so
the library is imported here with `cryptography` hidden from it: it then marks Passport decryption as
unavailable. Anything else that imports `cryptography` later gets it as usual.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

_HIDDEN = "cryptography"


class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == _HIDDEN or fullname.startswith(_HIDDEN + "."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (hidden from python-telegram-bot)",
                                      name=fullname)
        return None


def load() -> None:
    """Import the library once; a no-op when it (or `cryptography`, which it then uses) is loaded."""
    if "telegram" in sys.modules or _HIDDEN in sys.modules:
        return
    hide = _Hide()
    sys.meta_path.insert(0, hide)
    try:
        import telegram  # noqa: F401
    finally:
        sys.meta_path.remove(hide)
