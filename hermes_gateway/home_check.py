"""Whether `HERMES_HOME` can hold the gateway's data, asked before anything is created in it.

The home may not exist yet (the gateway makes it), so what is tried is what the gateway would do first:
make a folder in the nearest folder that exists, or a file in the home when it does. What is made to try
is removed at once, so a check leaves nothing behind. For a service that runs as another user (the
systemd unit, a container's uid), the same try is made in a forked child that has dropped to that user's
uid, gid and groups: root passes every permission check, so asking as root would say nothing.
"""

from __future__ import annotations

import os
import pwd
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ServiceUser:
    """The account a service runs the gateway as, with the groups the service would have."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]

    @classmethod
    def named(cls, name: str) -> ServiceUser:
        """The account called `name`; ValueError in one sentence when there is none."""
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise ValueError(f"--service-user {name}: there is no user of that name on this machine.") from None
        if os.geteuid() not in (0, entry.pw_uid):
            raise ValueError(f"--service-user {name}: only root can try HERMES_HOME as another user; run doctor "
                             f"with sudo.")
        return cls(name, entry.pw_uid, entry.pw_gid, tuple(os.getgrouplist(name, entry.pw_gid)))


def home_problem(home: Path, user: ServiceUser | None = None) -> str | None:
    """One sentence when `home` cannot be the data folder (of this process, or of `user`); None if it can."""
    return folder_problem(home, f"HERMES_HOME={home}", "HERMES_HOME", user)


def folder_problem(folder: Path, label: str, variable: str, user: ServiceUser | None = None) -> str | None:
    """One sentence, starting with `label` and naming the `variable` to change, when `folder` cannot be
    made or written (by this process, or by `user`); None when it can."""
    existing = _nearest_existing(folder)
    if existing != folder.absolute() and not existing.is_dir():
        return (f"{label} cannot be created: {existing} is a file, not a folder; point {variable} at a folder "
                f"(it is created when missing).")
    if existing == folder.absolute() and not existing.is_dir():
        return f"{label} is a file, not a folder: point {variable} at a folder (it is created when missing)."
    kind = "file" if existing == folder.absolute() else "folder"
    failure = _try_as(user, existing, kind) if user is not None else _try_here(existing, kind)
    if failure is None:
        return None
    name = user.name if user is not None else _current_user()
    what = f"create files in {folder}" if kind == "file" else f"create {folder} (in {existing})"
    return (f"{label} is not usable: the user {name} cannot {what} ({failure}); give that user the folder "
            f"(e.g. chown -R {name} {existing}) or point {variable} elsewhere.")


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _try_here(where: Path, kind: str) -> str | None:
    try:
        if kind == "file":
            fd, made = tempfile.mkstemp(dir=where, prefix=".hermes-check-")
            os.close(fd)
            os.unlink(made)
        else:
            os.rmdir(tempfile.mkdtemp(dir=where, prefix=".hermes-check-"))
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _try_as(user: ServiceUser, where: Path, kind: str) -> str | None:
    """The same try in a forked child that has become `user` (no interpreter is started: the service user
    may not be able to read this one's folder); the child writes its failure, if any, to a pipe."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only system calls, then out without running the parent's cleanups
        os.close(read_end)
        try:
            os.setgroups(list(user.groups))
            os.setgid(user.gid)
            os.setuid(user.uid)
            failure = _try_here(where, kind)
        except OSError as exc:
            failure = exc.strerror or str(exc)
        os.write(write_end, (failure or "").encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as said:
        failure = said.read().decode()
    os.waitpid(pid, 0)
    return failure or None


def _current_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())

