"""Where the files people send are kept: one folder per conversation under `HERMES_HOME/attachments/`.

The adapters save into it, `read_document` and `send_file` read from it, the retention sweep and `/forget` delete
from it; they all find it here.
"""

from __future__ import annotations

import re

ATTACHMENTS = "attachments"  # under HERMES_HOME
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def attachment_folder_name(session_key: str) -> str:
    """The folder a conversation's attachments are saved in (`attachments/<this>/`)."""
    return _UNSAFE.sub("_", session_key).strip("._")[:120]
