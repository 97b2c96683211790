"""What the sandbox's limit tests run inside it."""

from __future__ import annotations

# Six children each allocate (and touch) 200 MB and say so; the parent then asks each, on its stdin,
# whether it is still alive: the answers count the children holding their 200 MB at one moment.
SIX_HOLDERS = """
import subprocess, sys
HOLD = "x = b'x' * (200 << 20); print('held', flush=True); sys.stdin.readline(); print('alive', flush=True)"
kids = [subprocess.Popen([sys.executable, '-c', 'import sys; ' + HOLD], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE) for _ in range(6)]
said_held = [kid for kid in kids if kid.stdout.readline() == b'held\\n']
alive = 0
for kid in said_held:
    try:
        kid.stdin.write(b'?\\n'); kid.stdin.flush()
    except BrokenPipeError:
        continue
    alive += kid.stdout.readline() == b'alive\\n'
print(f'{alive} held 200 MB at once', flush=True)
"""


def held_at_once(text: str) -> int:
    """How many children SIX_HOLDERS found holding their 200 MB at one moment (-1: it never said)."""
    said = [line for line in text.splitlines() if line.endswith("held 200 MB at once")]
    return int(said[0].split()[0]) if said else -1
