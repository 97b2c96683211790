"""python-telegram-bot loads without Telegram Passport's cryptography and httpx's command line (rich), and
both still load for whatever asks for them afterwards; checked in a fresh interpreter, where nothing
imported them yet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from adapters.telegram.library import load
load()
import telegram._bot
print("cryptography" in sys.modules, telegram._bot.CRYPTO_INSTALLED, "rich" in sys.modules)
from cryptography.hazmat.primitives.hashes import SHA256
import httpx
print(SHA256.name, callable(httpx.main))
"""


def test_the_library_loads_without_cryptography_or_rich_which_others_can_still_import() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout.split() == ["False", "False", "False", "sha256", "True"]
