"""Attachment retention in a running gateway: the daily job (on one replica, through the leased scheduler)
deletes the files people sent once past the profile's `attachments.retention_days`, and the temporary files
of downloads cut by a crash are gone once the gateway has started."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from engine_harness import make_profile

from hermes_engine.attachments.retention import DAY, JOB, PARTIAL_GRACE_SECONDS, AttachmentRetention, partial_name


def _aged(path: Path, age_seconds: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n")
    then = time.time() - age_seconds
    os.utime(path, (then, then))
    return path


async def _first_run(e, name: str) -> None:
    job = e.gateway.scheduler.jobs[name]
    assert job.interval == DAY and job.lease  # daily, on one replica
    for _ in range(500):
        if job.runs and not job.running:
            break
        await asyncio.sleep(0.02)
    assert job.runs == 1 and job.last_error is None


async def test_the_gateway_deletes_attachments_past_the_profiles_retention(engine, tmp_path):
    folder = tmp_path / "attachments" / "telegram_1_dm_7"
    old = _aged(folder / "10-screenshot.png", 8 * DAY)
    recent = _aged(folder / "11-screenshot.png", 6 * DAY)
    gone_folder = _aged(tmp_path / "attachments" / "telegram_1_dm_8" / "3-a.png", 9 * DAY).parent

    e = await engine(profile=make_profile(attachments={"retention_days": 7}))
    assert any(isinstance(f, AttachmentRetention) for f in e.gateway.features)
    await _first_run(e, f"{JOB}:{e.gateway.bot}")

    assert not old.exists() and recent.exists()
    assert not gone_folder.exists()


async def test_retention_zero_keeps_files_and_still_clears_temporary_files_of_cut_downloads(engine, tmp_path):
    folder = tmp_path / "attachments" / "slack_T1_dm_D1"
    ancient = _aged(folder / "1-report.pdf", 3650 * DAY)
    cut = _aged(folder / partial_name(), PARTIAL_GRACE_SECONDS + 60)

    e = await engine(profile=make_profile(attachments={"retention_days": 0}))
    assert not cut.exists()  # swept at start, before any job ran
    await _first_run(e, f"{JOB}:{e.gateway.bot}")

    assert ancient.exists()
