"""A lease or claim of a process that is gone is taken at once on its own replica, never across replicas.

The processes here are real: a `sleep` child stands for another gateway process, killed with SIGKILL where a
test needs a dead holder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from kanban_kit import Clock, database
from postgres import BACKENDS

from hermes_engine.core.scheduler import RAN_RECENTLY, Scheduler
from hermes_engine.holders import Holder, holder_gone, new_holder, process_holder
from hermes_engine.ports.storage import CardSpec


def _holder_of(pid: int, *, replica: str | None = None, boot: str | None = None, started: int | None = None) -> str:
    me = Holder.parse(process_holder(replica))
    assert me is not None
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        start = int(f.read().rpartition(")")[2].split()[19])
    return str(Holder(me.replica, me.boot if boot is None else boot, pid, start if started is None else started, "t"))


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "600"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def dead_holder() -> str:
    """The holder text of a process of this replica that was killed and reaped."""
    proc = subprocess.Popen(["sleep", "600"])
    holder = _holder_of(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return holder


# ------------------------------------------------------------------------------------- judging a holder

def test_a_running_process_of_this_replica_is_not_gone(child):
    assert not holder_gone(_holder_of(child.pid))
    assert not holder_gone(process_holder()) and not holder_gone(new_holder())


def test_a_killed_process_is_gone_before_and_after_its_parent_reaps_it(child):
    holder = _holder_of(child.pid)
    child.send_signal(signal.SIGKILL)
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # dead, still a zombie
    assert holder_gone(holder)
    child.wait()
    assert holder_gone(holder)


def test_a_pid_now_running_a_process_started_later_does_not_keep_the_old_holder_alive(child):
    holder = _holder_of(child.pid)
    reused = Holder.parse(holder)
    assert reused is not None
    assert holder_gone(str(Holder(reused.replica, reused.boot, reused.pid, reused.started - 1, "t")))
    assert not holder_gone(holder)


def test_a_non_dumpable_gateway_process_is_still_judged_by_its_start_time():
    """The gateway makes itself non-dumpable (hermes_gateway/dumpable.py): its /proc/<pid>/stat stays readable."""
    code = ("import sys, time\nfrom hermes_gateway.dumpable import make_non_dumpable\nmake_non_dumpable()\n"
            "print('ready', flush=True)\ntime.sleep(600)\n")
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
            holder = Holder.parse(_holder_of(proc.pid))
            assert holder is not None and holder.started > 0
            assert not holder_gone(str(holder))
            assert holder_gone(str(Holder(holder.replica, holder.boot, holder.pid, holder.started - 1, "t")))
        finally:
            proc.kill()


def test_a_holder_from_another_boot_of_this_replica_is_gone_even_if_its_pid_runs_now(child):
    me = Holder.parse(process_holder())
    assert me is not None and me.boot, "this test needs /proc/sys/kernel/random/boot_id"
    other_boot = "0" * 8 if me.boot != "0" * 8 else "1" * 8
    assert holder_gone(_holder_of(child.pid, boot=other_boot))
    assert holder_gone(_holder_of(os.getpid(), boot=other_boot))


def test_a_holder_on_another_replica_is_never_judged_even_with_a_dead_pid(dead_holder):
    theirs = Holder.parse(dead_holder)
    assert theirs is not None
    elsewhere = str(Holder("another-host", theirs.boot, theirs.pid, theirs.started, theirs.tag))
    assert not holder_gone(elsewhere)
    assert holder_gone(dead_holder)


@pytest.mark.parametrize("text", ["replica-a", "gateway-1:1234:abcdef", "", ":::::", RAN_RECENTLY,
                                  "host:zz:12:34:t", "host:abcd:x:34:t"])
def test_text_that_names_no_process_is_never_gone(text):
    assert not holder_gone(text)


def test_a_kanban_claim_is_judged_by_the_holder_before_its_attempt(dead_holder, child):
    assert holder_gone(f"{dead_holder}#2")
    assert not holder_gone(f"{process_holder()}#2")


# ------------------------------------------------------------------------------------- leases in the store

pytestmark_backends = pytest.mark.parametrize("backend", BACKENDS)


@pytest.fixture
async def make(backend, tmp_path):
    async with database(backend, tmp_path) as factory:
        yield factory


@pytest.fixture
async def store(make):
    s = make(clock=Clock())
    await s.init()
    try:
        yield s
    finally:
        await s.close()


@pytestmark_backends
async def test_a_lease_of_a_dead_process_of_this_replica_is_taken_at_once(store, dead_holder):
    assert await store.acquire_lease("telegram-poller:1", dead_holder, 900)
    me = new_holder()
    assert await store.acquire_lease("telegram-poller:1", me, 30)
    assert not await store.acquire_lease("telegram-poller:1", dead_holder, 30)  # the old one is out
    assert await store.renew_lease("telegram-poller:1", me, 30)


@pytestmark_backends
async def test_a_lease_of_a_live_process_is_not_taken_before_it_expires(store, child):
    live = _holder_of(child.pid)
    assert await store.acquire_lease("session:bot:k", live, 900)
    assert not await store.acquire_lease("session:bot:k", new_holder(), 30)
    assert await store.release_lease("session:bot:k", live)


@pytestmark_backends
async def test_a_lease_of_a_dead_pid_on_another_replica_waits_out_its_period(make, dead_holder):
    clock = Clock()
    store = make(clock=clock)
    await store.init()
    try:
        theirs = Holder.parse(dead_holder)
        assert theirs is not None
        elsewhere = str(Holder("replica-b", theirs.boot, theirs.pid, theirs.started, "t"))
        assert await store.acquire_lease("discord-gateway:1", elsewhere, 60)
        assert not await store.acquire_lease("discord-gateway:1", new_holder(), 60)
        clock.advance(61)
        assert await store.acquire_lease("discord-gateway:1", new_holder(), 60)
    finally:
        await store.close()


@pytestmark_backends
async def test_a_lease_is_handed_over_only_by_its_holder(store):
    a, b = new_holder(), new_holder()
    assert await store.acquire_lease("job", a, 60)
    assert not await store.hand_over_lease("job", b, RAN_RECENTLY, 60)
    assert await store.hand_over_lease("job", a, RAN_RECENTLY, 60)
    assert not await store.acquire_lease("job", a, 60)


# ------------------------------------------------------------------------------------- scheduled jobs

@pytestmark_backends
async def test_a_finished_job_is_not_run_again_by_a_restart_but_one_cut_by_a_crash_is(store, dead_holder):
    runs: list[str] = []

    async def curate() -> None:
        runs.append("ran")

    first = Scheduler(store, poll_seconds=60)
    first.every("curator", 3600, curate)
    assert await first.tick(wait=True) == ["curator"]
    restarted = Scheduler(store, poll_seconds=60)  # a new process: another holder
    restarted.every("curator", 3600, curate)
    assert await restarted.tick(wait=True) == []  # the finished run's marker holds for the interval
    assert runs == ["ran"]

    assert await store.acquire_lease("housekeeping", dead_holder, 3600)  # a run cut off when its process died
    restarted.every("housekeeping", 3600, curate)
    assert await restarted.tick(wait=True) == ["housekeeping"]
    assert runs == ["ran", "ran"]


# ------------------------------------------------------------------------------------- kanban claims

@pytestmark_backends
async def test_a_card_claimed_by_a_dead_process_is_reclaimed_at_once_and_runs_again(store, dead_holder, child):
    [card] = await store.create_cards([CardSpec("research", key="a")], actor="test")
    await store.promote_ready("default")
    [claimed] = await store.claim_cards("default", dead_holder, lease_seconds=900, max_running=3)
    assert claimed.id == card.id and claimed.attempts == 1
    [other] = await store.create_cards([CardSpec("live", key="b")], actor="test")
    await store.promote_ready("default")
    [running] = await store.claim_cards("default", _holder_of(child.pid), lease_seconds=900, max_running=3)
    assert running.id == other.id

    [reclaimed] = await store.reclaim_stale("default", max_failures=2)
    assert reclaimed.id == card.id and reclaimed.status == "ready"
    assert "no longer runs" in (reclaimed.reason or "")
    assert (await store.get_card(other.id)).status == "running"  # its worker's process still runs
    [again] = await store.claim_cards("default", new_holder(), lease_seconds=900, max_running=3)
    assert again.id == card.id and again.attempts == 2
