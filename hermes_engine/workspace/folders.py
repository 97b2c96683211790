"""Where workspaces live and what their folders are called.

A command in the sandbox can read /proc/self/mountinfo, and the kernel names every bind mount there by its
folder's path within its file system, whatever bwrap does. So that path must say nothing: workspaces live
under a root of their own (`HERMES_WORKSPACE_ROOT`; a file system mounted there leaves the path
`/<name>`), and a folder's name is an HMAC, under a key kept in the gateway's home, of the workspace's scope
(`person-<id>`, `chat-<digest>`, `card-<id>`) and of its bot: it names neither the person nor the bot, and
a command that sees its own name cannot work out anyone else's. The name is `<scope part>-<bot part>`, so
forgetting a person finds their folders under every bot without knowing the bots.

Workspaces made before, as `HERMES_HOME/workspaces/<bot>/<scope>/`, are moved to their new name the first
time they are used (copied when the new root is another file system), so nobody's files are lost.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import hmac
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from hermes_engine.workspace.space import WorkspaceError

KEY_FILE = "workspace-names.key"
LEGACY = "workspaces"  # HERMES_HOME/workspaces/<bot>/<scope>/, the layout before opaque names
_KEY_BYTES = 32
SERVERS = "mcp-servers"  # the servers' scope: no workspace scope is named so (person-, chat-, card-)


def default_root(home: Path) -> Path:
    """The root when `HERMES_WORKSPACE_ROOT` is unset: under the home, where workspaces always were."""
    return Path(home) / LEGACY


def _load_key(home: Path) -> bytes:
    """The naming key, made once: written aside and linked into place, so replicas sharing a home starting
    together all read the one that won, never a half-written file."""
    path = Path(home) / KEY_FILE
    with contextlib.suppress(FileNotFoundError):
        return _checked(path, path.read_bytes())
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = path.with_name(f".{KEY_FILE}.{secrets.token_hex(8)}")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, secrets.token_bytes(_KEY_BYTES))
    finally:
        os.close(fd)
    try:
        os.link(aside, path)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links: the last of two racing starts wins instead
        if not path.exists():
            os.rename(aside, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            aside.unlink()
    return _checked(path, path.read_bytes())


def _checked(path: Path, key: bytes) -> bytes:
    if len(key) != _KEY_BYTES:
        raise WorkspaceError(f"{path} holds {len(key)} bytes, not the {_KEY_BYTES} of the workspaces' naming key: "
                             "restore it from a backup (the workspaces are named by it); nothing was changed.")
    return key


@dataclass(frozen=True)
class WorkspaceFolders:
    """The folders of every bot's workspaces (and sandboxed servers' folders) under one root."""

    home: Path
    root: Path

    @classmethod
    def of(cls, home: Path, root: Path | None = None) -> WorkspaceFolders:
        return cls(Path(home), Path(root) if root is not None else default_root(home))

    @functools.cached_property
    def key(self) -> bytes:
        return _load_key(self.home)

    def _digest(self, kind: str, value: str, length: int) -> str:
        return hmac.new(self.key, f"{kind}\0{value}".encode(), hashlib.sha256).hexdigest()[:length]

    def name(self, bot: str, scope: str) -> str:
        """The folder name of `bot`'s workspace for `scope`: nothing of either can be read from it."""
        return f"{self._digest('scope', scope, 24)}-{self._digest('bot', bot, 12)}"

    def folder(self, bot: str, scope: str, *, was: Path | None = None) -> Path:
        """The folder of `bot`'s workspace for `scope`; one left in the old layout (`was`, by default
        `HERMES_HOME/workspaces/<bot>/<scope>`) is moved here first."""
        new = self.root / self.name(bot, scope)
        old = was if was is not None else self.home / LEGACY / bot / scope
        if not new.exists() and old.is_dir() and not old.is_symlink():
            _move(old, new)
        return new

    def servers(self, bot: str) -> Path:
        """The folder holding `bot`'s sandboxed MCP servers' own folders (it was `HERMES_HOME/mcp/<bot>`)."""
        return self.folder(bot, SERVERS, was=self.home / "mcp" / bot)

    def of_scope(self, scope: str) -> list[Path]:
        """The workspaces of `scope` under every bot, old layout included (what forgetting a person removes)."""
        found = []
        if (self.home / KEY_FILE).exists():  # without a key no folder was ever named by it
            found = [p for p in self.root.glob(f"{self._digest('scope', scope, 24)}-*")
                     if p.is_dir() and not p.is_symlink()]
        legacy = self.home / LEGACY
        if legacy.is_dir() and not legacy.is_symlink():
            found += [bot / scope for bot in sorted(legacy.iterdir())
                      if not bot.is_symlink() and bot.is_dir() and (bot / scope).is_dir()
                      and not (bot / scope).is_symlink()]
        return found


def _move(old: Path, new: Path) -> None:
    """Rename `old` to `new`; across file systems, copy beside `new` first and rename, so a half-made copy
    is never taken for the workspace. The emptied bot folder of the old layout goes too."""
    new.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(old, new)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            if new.exists():  # another replica moved it first
                return
            raise
        _copy_across(old, new)
    with contextlib.suppress(OSError):
        old.parent.rmdir()  # only when empty: other scopes of the bot may still wait to move


def _copy_across(old: Path, new: Path) -> None:
    aside = new.with_name(f".{new.name}.{secrets.token_hex(4)}")
    shutil.copytree(old, aside, symlinks=True)
    st = os.lstat(old)
    with contextlib.suppress(PermissionError):
        os.chown(aside, st.st_uid, st.st_gid)
    try:
        os.rename(aside, new)
    except OSError:
        shutil.rmtree(aside, ignore_errors=True)
        if not new.exists():
            raise
        return
    shutil.rmtree(old)
