"""Content an admin approved: fingerprints of low-severity scan findings, kept under HERMES_HOME.

One JSON file, `<HERMES_HOME>/security/approved.json`, shared by the gateway and the CLI: every change is a
read-modify-write under a file lock, replaced atomically. Readers cache it by modification time, so a scan
costs one `stat` when nothing changed.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from hermes_engine.atomic import atomic_write_text
from hermes_engine.config import Settings
from hermes_engine.filelock import FileLock

log = logging.getLogger(__name__)

FILE = Path("security") / "approved.json"


class _Approvable(Protocol):
    @property
    def rule(self) -> str: ...
    @property
    def excerpt(self) -> str: ...
    @property
    def fingerprint(self) -> str: ...


class ApprovedHashes:
    """The approved fingerprints of one HERMES_HOME."""

    _by_path: dict[Path, ApprovedHashes] = {}
    _homes: dict[str | None, Path] = {}
    _registry = threading.Lock()

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = FileLock(self.path.with_name(self.path.name + ".lock"))
        self._seen: tuple[int, int] | None = None
        self._entries: dict[str, dict[str, Any]] = {}

    @classmethod
    def default(cls) -> ApprovedHashes:
        """The store of the HERMES_HOME in the environment (one object per path, for its cache)."""
        key = os.environ.get("HERMES_HOME")
        with cls._registry:
            home = cls._homes.get(key)
            if home is None:
                home = cls._homes[key] = Settings().home
            path = home / FILE
            store = cls._by_path.get(path)
            if store is None:
                store = cls._by_path[path] = cls(path)
            return store

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._seen, self._entries = None, {}
            return self._entries
        if self._seen != (st.st_mtime_ns, st.st_size):
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self._entries = dict(data.get("approved") or {})
            except (OSError, ValueError, AttributeError) as exc:
                log.warning("unreadable approvals file %s (%s); treating it as empty", self.path, exc)
                self._entries = {}
            self._seen = (st.st_mtime_ns, st.st_size)
        return self._entries

    def fingerprints(self) -> frozenset[str]:
        return frozenset(self._read())

    def entries(self) -> dict[str, dict[str, Any]]:
        """fingerprint -> {"rule", "excerpt", "by", "at"}."""
        return dict(self._read())

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        atomic_write_text(self.path, json.dumps({"approved": entries}, ensure_ascii=False, indent=1, sort_keys=True))

    def approve(self, findings: Iterable[_Approvable], *, by: str) -> list[str]:
        """Record the findings' fingerprints as approved by `by`; returns the newly approved ones."""
        return self._add({f.fingerprint: (f.rule, f.excerpt) for f in findings if f.fingerprint}, by)

    def approve_fingerprints(self, fingerprints: Iterable[str], *, by: str) -> list[str]:
        """Approve fingerprints an admin was shown (in a refusal the model relayed)."""
        return self._add({fp: ("", "") for fp in fingerprints}, by)

    def _add(self, wanted: dict[str, tuple[str, str]], by: str) -> list[str]:
        if not wanted:
            return []
        with self._lock.hold():
            entries = self._read()
            new = [fp for fp in wanted if fp not in entries]
            if new:
                at = datetime.now(UTC).isoformat(timespec="seconds")
                self._write({**entries, **{fp: {"rule": wanted[fp][0], "excerpt": wanted[fp][1], "by": by, "at": at}
                                           for fp in new}})
        return new

    def revoke(self, fingerprint: str) -> bool:
        with self._lock.hold():
            entries = self._read()
            if fingerprint not in entries:
                return False
            self._write({fp: e for fp, e in entries.items() if fp != fingerprint})
            return True


__all__ = ["ApprovedHashes", "FILE"]
