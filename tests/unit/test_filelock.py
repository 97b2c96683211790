"""The shared file lock: exclusion across real processes, re-entrancy per thread, and a safe lock file."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hermes_engine.filelock import LOCK_MODE, AsyncFileLocks, FileLock, UnsafeLockFile

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")

HOLDER = textwrap.dedent("""
    import sys
    from hermes_engine.filelock import FileLock
    with FileLock(sys.argv[1]).hold():
        print("held", flush=True)
        sys.stdin.readline()  # hold until the test says so
    print("released", flush=True)
""")

WAITER = textwrap.dedent("""
    import sys
    from hermes_engine.filelock import FileLock
    with FileLock(sys.argv[1]).hold():
        print("acquired", flush=True)
""")

COUNTER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from hermes_engine.filelock import FileLock
    lock, counter = FileLock(sys.argv[1]), Path(sys.argv[2])
    for _ in range(int(sys.argv[3])):
        with lock.hold():
            n = int(counter.read_text())
            time.sleep(0.001)  # widen the window a lost update would need
            counter.write_text(str(n + 1))
""")


def _python(script: str, *args: str, stdin: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", script, *args], stdin=stdin, stdout=subprocess.PIPE,
                            text=True)


@pytest.fixture
def lock_path(tmp_path: Path) -> Path:
    return tmp_path / "locks" / "test.lock"


def test_a_second_process_waits_while_the_lock_is_held(lock_path: Path):
    with FileLock(lock_path).hold():
        waiter = _python(WAITER, str(lock_path))
        time.sleep(0.5)
        assert waiter.poll() is None  # still blocked in flock
    out, _ = waiter.communicate(timeout=30)
    assert out.strip() == "acquired" and waiter.returncode == 0


def test_read_modify_write_from_two_processes_loses_nothing(tmp_path: Path, lock_path: Path):
    counter = tmp_path / "counter"
    counter.write_text("0")
    workers = [_python(COUNTER, str(lock_path), str(counter), "60") for _ in range(2)]
    for worker in workers:
        worker.communicate(timeout=60)
        assert worker.returncode == 0
    assert counter.read_text() == "120"


async def test_async_lock_waits_for_another_process_without_blocking_the_loop(lock_path: Path):
    holder = _python(HOLDER, str(lock_path), stdin=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdin is not None
    assert (await asyncio.to_thread(holder.stdout.readline)).strip() == "held"
    acquired = asyncio.Event()

    async def take() -> None:
        async with AsyncFileLocks().hold(lock_path):
            acquired.set()

    task = asyncio.create_task(take())
    ticks = 0
    for _ in range(20):  # the loop keeps running while the task waits for the other process
        await asyncio.sleep(0.01)
        ticks += 1
    assert ticks == 20 and not acquired.is_set()
    holder.stdin.write("\n")
    holder.stdin.flush()
    await asyncio.wait_for(task, timeout=30)
    assert acquired.is_set()
    holder.communicate(timeout=30)


async def test_cancelling_a_waiter_releases_nothing_it_does_not_hold(lock_path: Path):
    holder = _python(HOLDER, str(lock_path), stdin=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdin is not None
    assert (await asyncio.to_thread(holder.stdout.readline)).strip() == "held"
    locks = AsyncFileLocks()

    async def take() -> None:
        async with locks.hold(lock_path):
            pass

    task = asyncio.create_task(take())
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    holder.stdin.write("\n")
    holder.stdin.flush()
    assert holder.communicate(timeout=30)[0].strip() == "released"
    async with asyncio.timeout(30):
        async with locks.hold(lock_path):  # the cancelled waiter left nothing locked behind
            pass


async def test_async_locks_serialize_tasks_of_one_object(lock_path: Path):
    locks, inside, most = AsyncFileLocks(), 0, 0

    async def work() -> None:
        nonlocal inside, most
        async with locks.hold(lock_path):
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.005)
            inside -= 1

    await asyncio.gather(*(work() for _ in range(10)))
    assert most == 1


def test_sync_lock_is_reentrant_in_one_thread_and_excludes_other_threads(lock_path: Path):
    first, second = FileLock(lock_path), FileLock(lock_path)
    entered = threading.Event()

    def other() -> None:
        with second.hold():
            entered.set()

    with first.hold(), second.hold():  # a nested hold in the owning thread passes through
        thread = threading.Thread(target=other)
        thread.start()
        assert not entered.wait(0.3)
    thread.join(10)
    assert entered.is_set()


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path: Path, lock_path: Path):
    target = tmp_path / "elsewhere"
    target.write_text("precious")
    os.chmod(target, 0o644)
    lock_path.parent.mkdir(parents=True)
    lock_path.symlink_to(target)
    with pytest.raises(UnsafeLockFile), FileLock(lock_path).hold():
        pass
    assert target.read_text() == "precious" and stat.S_IMODE(target.stat().st_mode) == 0o644


def _dangling_link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True)
    link.symlink_to(target)


async def test_the_async_lock_refuses_a_symlink_too(tmp_path: Path, lock_path: Path):
    _dangling_link(lock_path, tmp_path / "missing-target")
    with pytest.raises(UnsafeLockFile):
        async with AsyncFileLocks().hold(lock_path):
            pass
    assert sorted(os.listdir(tmp_path)) == ["locks"]  # the link's target was not created through it


def test_a_lock_path_that_is_not_a_file_is_refused(lock_path: Path):
    lock_path.mkdir(parents=True)
    with pytest.raises(OSError), FileLock(lock_path).hold():
        pass


def test_the_lock_file_is_private(lock_path: Path):
    old = os.umask(0)  # even a permissive umask leaves it 0o600
    try:
        with FileLock(lock_path).hold():
            pass
    finally:
        os.umask(old)
    assert stat.S_IMODE(lock_path.stat().st_mode) == LOCK_MODE == 0o600


def test_an_existing_lock_file_is_made_private(lock_path: Path):
    lock_path.parent.mkdir(parents=True)
    lock_path.touch()
    os.chmod(lock_path, 0o666)
    with FileLock(lock_path).hold():
        pass
    assert stat.S_IMODE(lock_path.stat().st_mode) == 0o600
