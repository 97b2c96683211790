"""The gateway's process is made non-dumpable as it starts.

Its environment holds the model providers' keys and the platforms' tokens, and its memory every
conversation it has in hand. Any process of the same user could read both through `/proc/<pid>/environ`
and `/proc/<pid>/mem` (an MCP server run with `sandbox: false`, a command some other service runs); a
non-dumpable process lets only root with CAP_SYS_PTRACE in, and writes no core dump. `/proc/<pid>/stat`
stays readable to all, which is what another replica reads to tell whether a lease holder is alive
(`hermes_engine/holders.py`). The flag is reset by `execve`: the programs the gateway starts are
dumpable again, and hold only the environment they were given. Debuggers of the same user (py-spy)
need root or CAP_SYS_PTRACE for the gateway.
"""

from __future__ import annotations

import ctypes
import os
import sys

PR_SET_DUMPABLE = 4


def make_non_dumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0) on Linux; nothing elsewhere (no such flag)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_DUMPABLE, 0) failed: {os.strerror(code)}")
