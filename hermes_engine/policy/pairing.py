"""Pairing: how a stranger gets access to a bot that denies by default.

An unknown person who writes to the bot in a direct message gets a short code; the bot's admin approves it
on the server with ``hermes-gateway pairing approve CODE``; from then on the person is served. Platform
neutral: the engine's access gate (`policy.access`) calls `Pairing.is_approved`, `Pairing.request`,
`claim_notice` and `claim_unnotified` in worker threads, never on the event loop; the CLI calls `approve`, `pending`,
`approved` and `revoke`.

- Codes are 8 characters from an alphabet without look-alikes (no 0/O, 1/I), random (`secrets`), valid for
  one hour, unique among pending codes. A person with a live code gets the same code again.
- Replies are rate-limited per person (`max_replies_per_hour`, default 3): past that the bot stays silent,
  so a flood of messages cannot make the bot flood back; at most `max_codes_per_hour` new codes per person
  and `max_pending` live codes overall.
- A reply tells the person their own code and id, nothing about anyone else.

The state lives behind the small `PairingStore` protocol. `JsonPairingStore` keeps it in
``<HERMES_HOME>/pairing.json``: every change is a read-modify-write under an exclusive lock on a sibling
``pairing.json.lock`` (`hermes_engine.filelock`) and lands with an atomic replace, so the gateway process
and the CLI process see each other's changes and a crash never leaves half a file. Reads take no lock (the
replace is atomic) and are cached by the file's identity (inode, size, mtime).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from hermes_engine.atomic import atomic_write
from hermes_engine.filelock import FileLock

log = logging.getLogger(__name__)

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, no 1/I
CODE_LENGTH = 8
CODE_TTL_SECONDS = 3600.0
WINDOW_SECONDS = 3600.0
FILE_NAME = "pairing.json"

T = TypeVar("T")


def _key(platform: str, user_id: str) -> str:
    return f"{platform}:{user_id}"


def normalize_code(code: str) -> str:
    """What the admin typed → the stored form (case and separators ignored)."""
    return "".join(ch for ch in code.upper() if ch.isalnum())


def new_code(length: int = CODE_LENGTH) -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(length))


@dataclass
class PairingRequest:
    code: str
    platform: str
    user_id: str
    user_name: str
    created_at: float
    expires_at: float
    chat_id: str | None = None  # where to tell the person they were approved


@dataclass
class ApprovedUser:
    platform: str
    user_id: str
    user_name: str
    approved_at: float
    approved_by: str = "cli"
    chat_id: str | None = None
    notified: bool = False  # the person was told they now have access


@dataclass
class PairingState:
    pending: dict[str, PairingRequest] = field(default_factory=dict)  # code -> request
    approved: dict[str, ApprovedUser] = field(default_factory=dict)  # "platform:user" -> approval
    codes_issued: dict[str, list[float]] = field(default_factory=dict)  # "platform:user" -> times
    replies: dict[str, list[float]] = field(default_factory=dict)  # "platform:user" -> times

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1,
                "pending": {c: asdict(r) for c, r in self.pending.items()},
                "approved": {k: asdict(a) for k, a in self.approved.items()},
                "codes_issued": self.codes_issued, "replies": self.replies}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PairingState:
        return cls(pending={c: PairingRequest(**r) for c, r in (data.get("pending") or {}).items()},
                   approved={k: ApprovedUser(**a) for k, a in (data.get("approved") or {}).items()},
                   codes_issued={k: list(v) for k, v in (data.get("codes_issued") or {}).items()},
                   replies={k: list(v) for k, v in (data.get("replies") or {}).items()})


class PairingStore(Protocol):
    """Where pairing state lives. `update` must be atomic with respect to every other process."""

    def read(self) -> PairingState: ...

    def update(self, change: Callable[[PairingState], T]) -> T:
        """Apply `change` to the current state and save the result, all under one exclusive lock."""
        ...


class MemoryPairingStore:
    """For tests and single-process tools."""

    def __init__(self) -> None:
        self.state = PairingState()

    def read(self) -> PairingState:
        return PairingState.from_dict(json.loads(json.dumps(self.state.to_dict())))

    def update(self, change: Callable[[PairingState], T]) -> T:
        state = self.read()
        result = change(state)
        self.state = state
        return result


class JsonPairingStore:
    """`pairing.json` with a lock file beside it and atomic replaces (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self._lock = FileLock(self.lock_path)
        self._cache: tuple[tuple[int, int, int], PairingState] | None = None

    def read(self) -> PairingState:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return PairingState()
        identity = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self._cache is None or self._cache[0] != identity:
            self._cache = (identity, self._load())
        return PairingState.from_dict(self._cache[1].to_dict())  # a copy: callers may mutate it

    def update(self, change: Callable[[PairingState], T]) -> T:
        with self._lock.hold():
            state = self._load()
            result = change(state)
            self._write(state)
            self._cache = None
            return result

    def _load(self) -> PairingState:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return PairingState()
        try:
            return PairingState.from_dict(json.loads(text) if text.strip() else {})
        except (ValueError, TypeError) as exc:
            # Never silently forget approvals: refuse to work on a damaged file.
            raise RuntimeError(f"{self.path} is damaged ({exc}); fix or remove it") from exc

    def _write(self, state: PairingState) -> None:
        text = json.dumps(state.to_dict(), indent=1, sort_keys=True)
        atomic_write(self.path, text.encode("utf-8"), mode=0o600)


@dataclass(frozen=True)
class PairingAnswer:
    """What to tell a stranger. `code is None` means: say nothing (rate-limited, or too many pending)."""

    code: str | None
    expires_at: float = 0.0
    new: bool = False
    approved: bool = False  # already approved: serve them instead

    @property
    def should_reply(self) -> bool:
        return self.code is not None


class Pairing:
    """Pairing rules over a `PairingStore`. Methods are blocking (file I/O): call them from a thread in
    async code (``await asyncio.to_thread(pairing.request, ...)``)."""

    def __init__(self, store: PairingStore, *, code_ttl: float = CODE_TTL_SECONDS, max_replies_per_hour: int = 3,
                 max_codes_per_hour: int = 3, max_pending: int = 200,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.code_ttl = code_ttl
        self.max_replies_per_hour = max_replies_per_hour
        self.max_codes_per_hour = max_codes_per_hour
        self.max_pending = max_pending
        self.clock = clock

    @classmethod
    def for_home(cls, home: Path | str, **options: Any) -> Pairing:
        return cls(JsonPairingStore(Path(home) / FILE_NAME), **options)

    # -- the bot's side ----------------------------------------------------------------------------
    def is_approved(self, platform: str, user_id: str) -> bool:
        return _key(platform, str(user_id)) in self.store.read().approved

    def request(self, platform: str, user_id: str, user_name: str = "", *, chat_id: str | None = None) -> PairingAnswer:
        """A stranger wrote to the bot: their live code (reused), a new one, or silence when limited."""
        key = _key(platform, str(user_id))
        now = self.clock()

        def change(state: PairingState) -> PairingAnswer:
            self._prune(state, now)
            if key in state.approved:
                return PairingAnswer(None, approved=True)
            replies = state.replies.setdefault(key, [])
            if len(replies) >= self.max_replies_per_hour:
                return PairingAnswer(None)
            live = next((r for r in state.pending.values()
                         if r.platform == platform and r.user_id == str(user_id)), None)
            if live is not None:
                replies.append(now)
                return PairingAnswer(live.code, live.expires_at, new=False)
            issued = state.codes_issued.setdefault(key, [])
            if len(issued) >= self.max_codes_per_hour:
                return PairingAnswer(None)
            if len(state.pending) >= self.max_pending:
                log.warning("pairing: %d codes are pending; not issuing more until some expire", len(state.pending))
                return PairingAnswer(None)
            code = new_code()
            while code in state.pending:
                code = new_code()
            request = PairingRequest(code, platform, str(user_id), user_name, now, now + self.code_ttl,
                                     str(chat_id) if chat_id is not None else None)
            state.pending[code] = request
            issued.append(now)
            replies.append(now)
            log.info("pairing: code issued to %s user %s (%s)", platform, user_id, user_name or "no name")
            return PairingAnswer(code, request.expires_at, new=True)

        return self.store.update(change)

    def claim_notice(self, platform: str, user_id: str) -> ApprovedUser | None:
        """The approval of this person if they were not told of it yet, marked as told: the caller sends the
        notice (at most once, even with several gateway processes). None when not approved or told already;
        only then does it cost a write."""
        key = _key(platform, str(user_id))
        approval = self.store.read().approved.get(key)
        if approval is None or approval.notified:
            return None

        def change(state: PairingState) -> ApprovedUser | None:
            approval = state.approved.get(key)
            if approval is None or approval.notified:
                return None
            approval.notified = True
            return approval

        return self.store.update(change)

    def claim_unnotified(self, platform: str, *, older_than: float = 0.0) -> list[ApprovedUser]:
        """Approvals on `platform` whose person was not told yet, made at least `older_than` seconds ago;
        marked as told (at most once, even with several gateway processes). A younger approval is left to
        the person's next message (`claim_notice`), which then hears of it before its answer."""
        approved_by = self.clock() - older_than

        def due(approval: ApprovedUser) -> bool:
            return approval.platform == platform and not approval.notified and approval.approved_at <= approved_by

        if not any(due(a) for a in self.store.read().approved.values()):
            return []

        def change(state: PairingState) -> list[ApprovedUser]:
            claimed = [approval for approval in state.approved.values() if due(approval)]
            for approval in claimed:
                approval.notified = True
            return claimed

        return self.store.update(change)

    # -- the admin's side --------------------------------------------------------------------------
    def approve(self, code: str, *, approved_by: str = "cli") -> ApprovedUser | None:
        """Approve the person behind a live code; None when no live code matches."""
        wanted = normalize_code(code)
        now = self.clock()

        def change(state: PairingState) -> ApprovedUser | None:
            self._prune(state, now)
            request = state.pending.pop(wanted, None)
            if request is None:
                return None
            approval = ApprovedUser(request.platform, request.user_id, request.user_name, now, approved_by,
                                    request.chat_id, notified=request.chat_id is None)
            key = _key(request.platform, request.user_id)
            state.approved[key] = approval
            state.replies.pop(key, None)
            return approval

        return self.store.update(change)

    def approve_user(self, platform: str, user_id: str, user_name: str = "", *,
                     approved_by: str = "cli") -> ApprovedUser:
        """Approve someone by id, without a code (e.g. an admin command)."""
        now = self.clock()

        def change(state: PairingState) -> ApprovedUser:
            approval = ApprovedUser(platform, str(user_id), user_name, now, approved_by, notified=True)
            state.approved[_key(platform, str(user_id))] = approval
            for code in [c for c, r in state.pending.items() if r.platform == platform and r.user_id == str(user_id)]:
                del state.pending[code]
            return approval

        return self.store.update(change)

    def revoke(self, platform: str, user_id: str) -> bool:
        """Withdraw an approval (and any pending code of that person). False if there was none."""
        key = _key(platform, str(user_id))

        def change(state: PairingState) -> bool:
            found = state.approved.pop(key, None) is not None
            for code in [c for c, r in state.pending.items() if _key(r.platform, r.user_id) == key]:
                del state.pending[code]
                found = True
            return found

        return self.store.update(change)

    def pending(self) -> list[PairingRequest]:
        now = self.clock()
        return sorted((r for r in self.store.read().pending.values() if r.expires_at > now),
                      key=lambda r: r.created_at)

    def approved(self) -> list[ApprovedUser]:
        return sorted(self.store.read().approved.values(), key=lambda a: a.approved_at)

    # -- housekeeping ------------------------------------------------------------------------------
    def _prune(self, state: PairingState, now: float) -> None:
        for code in [c for c, r in state.pending.items() if r.expires_at <= now]:
            del state.pending[code]
        for table in (state.codes_issued, state.replies):
            for key in list(table):
                table[key] = [t for t in table[key] if now - t < WINDOW_SECONDS]
                if not table[key]:
                    del table[key]

