"""Per-chat outbound scheduler: every platform call an adapter makes to a chat goes through here.

One `OutboundScheduler` per adapter. Each chat (`adapters.delivery.Lanes.key(target)`) gets a lane: a
FIFO queue worked by its own task, so a slow or rate-limited chat never holds up another.

- Pacing: two paced calls to one lane start at least `interval` seconds apart.
- Interim work is disposable: submitting an interim op with the same `merge_key` as a pending interim op
  replaces it in place (only the newest frame of a message waits), and submitting a final (non-interim)
  op with that `merge_key` drops the pending interim one. Finals and sends are never dropped.
- 429: an op that raises `PlatformError` with `retry_after` pauses its lane for exactly that long (no
  call to that chat before the pause ends), then is retried first. Other lanes carry on.
- Other transient errors (`is_transient(exc)`, by default network errors and timeouts) are retried a
  bounded number of times with exponential backoff. Anything else fails the op's future.
- An optional global token bucket (`global_rate` calls a second) caps the adapter's overall rate,
  e.g. Telegram's ~30/s. A `spare` op (the typing indicator) runs only on a token no other call is
  waiting for and is dropped rather than wait for one: at the cap, answers go first.

Ops are zero-argument coroutine functions; they run when their turn comes, so an op can read the newest
state at that moment (streaming uses this to always send the latest frame).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from hermes_engine.errors import PlatformError

if TYPE_CHECKING:
    from hermes_engine.ports.inbound import ReplyTarget

__all__ = ["DROPPED", "OutboundScheduler", "PacedCall", "TokenBucket", "default_is_transient"]

log = logging.getLogger(__name__)

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[Any]]


class _Dropped:
    """Result of an interim op that was superseded or dropped before it ran."""

    _instance: _Dropped | None = None

    def __new__(cls) -> _Dropped:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DROPPED"

    def __bool__(self) -> bool:
        return False


DROPPED = _Dropped()


class PacedCall(Protocol):
    """One platform call run through its chat's lane (`PlatformAdapter.call`): what a part of an adapter
    that is not the reply path (approval questions, notices) needs so that a 429 waits instead of failing."""

    async def __call__(self, target: ReplyTarget, fn: Callable[[], Awaitable[Any]]) -> Any: ...


def default_is_transient(exc: BaseException) -> bool:
    """Network trouble and timeouts are worth retrying; platform refusals are not (by default)."""
    return isinstance(exc, (ConnectionError, TimeoutError, asyncio.TimeoutError, OSError))


def _nothing() -> None:
    return None


class TokenBucket:
    """A plain token bucket: `rate` tokens a second, at most `burst` saved up."""

    def __init__(self, rate: float, burst: float | None = None, *, clock: Clock = time.monotonic,
                 sleep: Sleep = asyncio.sleep) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.capacity = burst if burst is not None else max(1.0, rate)
        self._tokens = self.capacity
        self._clock = clock
        self._sleep = sleep
        self._last = clock()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:
            while True:
                if self._take(self._clock()):
                    return
                await self._sleep((1 - self._tokens) / self.rate)

    def try_acquire(self) -> bool:
        """A token at once, when one is saved up and no `acquire` waits for it."""
        return not self._lock.locked() and self._take(self._clock())

    def _take(self, now: float) -> bool:
        self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


@dataclass(eq=False)
class _Op:
    fn: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any]
    interim: bool
    merge_key: Hashable | None
    tag: Hashable | None
    paced: bool
    spare: bool = False
    attempts: int = 0
    rate_limited: int = 0


@dataclass(eq=False)
class _Lane:
    key: Hashable
    interval: float
    queue: deque[_Op] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    next_allowed: float = 0.0
    paused_until: float = 0.0
    running: _Op | None = None
    task: asyncio.Task[Any] | None = None


class OutboundScheduler:
    """Paces, merges and retries calls per chat. See the module docstring."""

    def __init__(self, interval: float = 1.0, *, global_rate: float | None = None,
                 global_burst: float | None = None, max_retries: int = 3, backoff: float = 0.5,
                 max_backoff: float = 8.0, max_rate_limit_retries: int = 5,
                 is_transient: Callable[[BaseException], bool] = default_is_transient,
                 clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep,
                 idle_timeout: float = 60.0) -> None:
        self.interval = interval
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_rate_limit_retries = max_rate_limit_retries
        self.is_transient = is_transient
        self.clock = clock
        self.sleep = sleep
        self.idle_timeout = max(idle_timeout, interval)
        self._bucket = (TokenBucket(global_rate, global_burst, clock=clock, sleep=sleep)
                        if global_rate else None)
        self._lanes: dict[Hashable, _Lane] = {}
        self._closed = False
        self.on_rate_limited: Callable[[], None] = _nothing  # told of every rate-limit answer (metrics)

    # -- submitting ---------------------------------------------------------------------------------
    def enqueue(self, key: Hashable, fn: Callable[[], Awaitable[Any]], *, interim: bool = False,
                merge_key: Hashable | None = None, tag: Hashable | None = None, paced: bool = True,
                interval: float | None = None, spare: bool = False) -> asyncio.Future[Any]:
        """Queue `fn` on lane `key`; the future resolves to its result, or `DROPPED` for a dropped
        interim op. `interval` (if given) sets that lane's pacing from now on. `spare`: dropped when the
        global rate has no token to spare for it (see the module docstring)."""
        if self._closed:
            raise PlatformError("outbound scheduler is stopped")
        lane = self._lane(key)
        if interval is not None:
            lane.interval = interval
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_consume_exception)
        op = _Op(fn, future, interim, merge_key, tag, paced, spare)
        placed = False
        if merge_key is not None and any(o.interim and o.merge_key == merge_key for o in lane.queue):
            queue: deque[_Op] = deque()
            for other in lane.queue:
                if other.interim and other.merge_key == merge_key:
                    _resolve(other.future, DROPPED)
                    if interim and not placed:
                        queue.append(op)  # the newest interim frame takes the old one's place
                        placed = True
                    continue
                queue.append(other)
            lane.queue = queue
        if not placed:
            lane.queue.append(op)
        lane.wakeup.set()
        return future

    async def submit(self, key: Hashable, fn: Callable[[], Awaitable[Any]], **options: Any) -> Any:
        """`enqueue` and wait for the outcome (raises the op's error)."""
        return await self.enqueue(key, fn, **options)

    def drop_pending(self, *, tag: Hashable | None = None, merge_key: Hashable | None = None) -> int:
        """Drop queued (not running) interim ops matching `tag` / `merge_key`; returns how many."""
        dropped = 0
        for lane in self._lanes.values():
            keep: deque[_Op] = deque()
            for op in lane.queue:
                if op.interim and (tag is None or op.tag == tag) and (merge_key is None or op.merge_key == merge_key):
                    _resolve(op.future, DROPPED)
                    dropped += 1
                else:
                    keep.append(op)
            lane.queue = keep
        return dropped

    def is_busy(self, key: Hashable) -> bool:
        """Whether the lane has work queued or running, or is paused by a rate limit."""
        lane = self._lanes.get(key)
        if lane is None:
            return False
        return bool(lane.queue) or lane.running is not None or lane.paused_until > self.clock()

    def paused_until(self, key: Hashable) -> float:
        lane = self._lanes.get(key)
        return lane.paused_until if lane else 0.0

    # -- lifecycle ----------------------------------------------------------------------------------
    async def stop(self, *, timeout: float = 10.0) -> None:
        """Stop taking work, drop pending interim ops, let finals drain for up to `timeout` seconds,
        then cancel what is left (its futures fail with `PlatformError`)."""
        self._closed = True
        self.drop_pending()
        tasks = [lane.task for lane in self._lanes.values() if lane.task and not lane.task.done()]
        for lane in self._lanes.values():
            lane.wakeup.set()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        for lane in list(self._lanes.values()):
            for op in lane.queue:
                _fail(op.future, PlatformError("outbound scheduler stopped before the call was made"))
            lane.queue.clear()
        self._lanes.clear()

    # -- the lane worker ----------------------------------------------------------------------------
    def _lane(self, key: Hashable) -> _Lane:
        lane = self._lanes.get(key)
        if lane is None:
            lane = _Lane(key, self.interval)
            self._lanes[key] = lane
        if lane.task is None or lane.task.done():
            lane.task = asyncio.get_running_loop().create_task(self._work(lane), name=f"outbound:{key!r}")
        return lane

    async def _work(self, lane: _Lane) -> None:
        try:
            while True:
                if not lane.queue:
                    if self._closed:
                        return
                    lane.wakeup.clear()
                    try:
                        await asyncio.wait_for(lane.wakeup.wait(), self.idle_timeout)
                    except TimeoutError:
                        now = self.clock()
                        if not lane.queue and now >= lane.paused_until and now >= lane.next_allowed:
                            return
                    continue
                op = lane.queue[0]
                now = self.clock()
                ready = max(lane.paused_until, lane.next_allowed if op.paced else 0.0)
                if ready > now:
                    await self.sleep(ready - now)
                    continue  # the head may have been replaced or dropped meanwhile
                lane.queue.popleft()
                if op.future.done():
                    continue
                if self._bucket is not None and op.spare:
                    if not self._bucket.try_acquire():
                        _resolve(op.future, DROPPED)
                        continue
                elif self._bucket is not None:
                    await self._bucket.acquire()
                    if lane.paused_until > self.clock():
                        lane.queue.appendleft(op)
                        continue
                await self._call(lane, op)
        finally:
            if self._lanes.get(lane.key) is lane and not lane.queue:
                del self._lanes[lane.key]

    async def _call(self, lane: _Lane, op: _Op) -> None:
        started = self.clock()
        if op.paced:
            lane.next_allowed = started + lane.interval
        lane.running = op
        try:
            result = await op.fn()
        except asyncio.CancelledError:
            _fail(op.future, PlatformError("outbound call cancelled"))
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is routed to the op's future
            self._failed(lane, op, exc)
        else:
            _resolve(op.future, result)
        finally:
            lane.running = None

    def _failed(self, lane: _Lane, op: _Op, exc: Exception) -> None:
        now = self.clock()
        if isinstance(exc, PlatformError) and exc.retry_after is not None:
            self.on_rate_limited()
        if op.interim and op.merge_key is not None and any(
                o.interim and o.merge_key == op.merge_key for o in lane.queue):
            _resolve(op.future, DROPPED)  # a newer frame is already waiting; it replaces the retry
            if isinstance(exc, PlatformError) and exc.retry_after is not None:
                lane.paused_until = max(lane.paused_until, now + max(0.0, float(exc.retry_after)))
            return
        retry_after = exc.retry_after if isinstance(exc, PlatformError) else None
        if retry_after is not None and op.rate_limited < self.max_rate_limit_retries:
            op.rate_limited += 1
            lane.paused_until = max(lane.paused_until, now + max(0.0, float(retry_after)))
            log.warning("rate limited on %r: pausing %.2fs, then retrying", lane.key, retry_after)
            lane.queue.appendleft(op)
            return
        if retry_after is None and op.attempts < self.max_retries and self.is_transient(exc):
            op.attempts += 1
            delay = min(self.max_backoff, self.backoff * 2 ** (op.attempts - 1))
            lane.next_allowed = max(lane.next_allowed, now + delay)
            if not op.paced:
                lane.paused_until = max(lane.paused_until, now + delay)
            log.info("transient error on %r (%s): retry %d in %.2fs", lane.key, exc, op.attempts, delay)
            lane.queue.appendleft(op)
            return
        _fail(op.future, exc)


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _consume_exception(future: asyncio.Future[Any]) -> None:
    """Mark a failed op's exception as retrieved: fire-and-forget ops (typing) must not warn."""
    if not future.cancelled():
        future.exception()
