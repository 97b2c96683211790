"""What a sandboxed command learns of the host from its workspace's line in /proc/self/mountinfo.

The kernel names a bind mount by its folder's path within the file system it lies on. A workspace whose
root is the root of a file system of its own (a volume or tmpfs mounted at `HERMES_WORKSPACE_ROOT`) shows
as `/<opaque name>`; under a plain folder it shows that folder's whole path, and on the home's file system
it can show where HERMES_HOME is. `exposure` says so at start, in one warning.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MOUNTINFO = Path("/proc/self/mountinfo")
_ESCAPE = re.compile(r"\\([0-7]{3})")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Mount:
    device: str  # major:minor of the file system
    root: PurePosixPath  # the mounted folder's path within its file system
    point: PurePosixPath  # where it is mounted


def _unescape(field: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse(text: str) -> list[Mount]:
    """The mounts of a mountinfo text, in its order (a later mount on a point hides the earlier)."""
    found = []
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) >= 5:
            found.append(Mount(fields[2], PurePosixPath(_unescape(fields[3])), PurePosixPath(_unescape(fields[4]))))
    return found


def holding(path: Path, mounts: list[Mount]) -> Mount:
    """The mount `path` lies on: the last one whose point is `path` or the nearest folder above it."""
    real = PurePosixPath(os.path.realpath(path))
    best: Mount | None = None
    for mount in mounts:
        if real == mount.point or mount.point in real.parents:
            if best is None or len(mount.point.parts) >= len(best.point.parts):
                best = mount
    if best is None:
        raise ValueError(f"{path} lies on no mount of the mount table")
    return best


def seen_inside(path: Path, mounts: list[Mount]) -> PurePosixPath:
    """`path` as the kernel names it in mountinfo when it is bind-mounted: its path within its file system."""
    mount = holding(path, mounts)
    return mount.root / PurePosixPath(os.path.realpath(path)).relative_to(mount.point)


def exposure(root: Path, home: Path, text: str | None = None) -> str | None:
    """None when a workspace under `root` shows commands nothing but its own name; else one sentence saying
    what they can learn and how to stop it. Sharing a file system with the home matters only when the path
    shown lies inside the home's (two volumes of one Docker host share a device, yet show apart)."""
    mounts = parse(MOUNTINFO.read_text() if text is None else text)
    mount = holding(root, mounts)
    seen = seen_inside(root, mounts)
    if mount.point != PurePosixPath(os.path.realpath(root)):
        why = f"{root} is not a mount point"
    elif mount.device == holding(home, mounts).device and (seen == (inner := seen_inside(home, mounts))
                                                            or inner in seen.parents):
        why = f"{root} lies inside HERMES_HOME's file system path"
    else:
        return None
    return (f"{why}: a command in the sandbox reads its workspace's host path, {seen}/<name>, in "
            f"/proc/self/mountinfo; mount a file system of its own (a volume or tmpfs) at HERMES_WORKSPACE_ROOT.")


@functools.cache
def say_what_commands_see(root: Path, home: Path) -> None:
    """Once a process for each root, however many bots share it: the operator learns at start what a
    sandboxed command can read of the host's paths, and how to stop it."""
    root.mkdir(parents=True, exist_ok=True)
    try:
        problem = exposure(root, home)
    except (OSError, ValueError) as exc:
        problem = f"what a sandboxed command sees of {root} in /proc/self/mountinfo cannot be told ({exc})"
    if problem is not None:
        log.warning("workspaces: %s", problem)
