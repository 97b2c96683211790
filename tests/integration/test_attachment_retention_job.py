"""Attachment retention in a running gateway: the daily job (on one replica, through the leased scheduler)
deletes the files people sent once past the profile's `attachments.retention_days`, and the temporary files
of downloads cut by a crash are gone once the gateway has started."""

from __future__ import annotations

import asyncio
import os
import sys
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


ROOT = Path(__file__).resolve().parents[2]
CUT_DOWNLOAD = """
import asyncio, sys
from pathlib import Path
import aiohttp
from adapters.downloads import stream_to

async def main():
    async with aiohttp.ClientSession(trust_env=False) as http:
        await stream_to(http, sys.argv[1], Path(sys.argv[2]), limit=100 * 1024 * 1024)

asyncio.run(main())
"""


async def test_a_download_killed_midway_leaves_a_temporary_file_that_the_sweep_removes(tmp_path):
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from hermes_engine.attachments.retention import is_partial, sweep

    hold = asyncio.Event()

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100_000)
        await hold.wait()  # the rest never comes: the process is killed first
        return response

    app = web.Application()
    app.router.add_get("/f", trickle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    folder = tmp_path / "attachments" / "slack_T1_dm_D1"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CUT_DOWNLOAD, str(server.make_url("/f")), str(folder / "1-shot.png"),
        cwd=ROOT)
    try:
        for _ in range(500):
            partials = [p for p in folder.iterdir() if is_partial(p.name)] if folder.is_dir() else []
            if partials and partials[0].stat().st_size > 0:
                break
            await asyncio.sleep(0.02)
        process.kill()  # kill -9: no `finally` runs
        await process.wait()
    finally:
        hold.set()
        await server.close()
    [partial] = partials
    assert partial.exists() and not (folder / "1-shot.png").exists()

    assert sweep(tmp_path / "attachments", time.time(), None).partials == 0  # fresh: it may be a live download
    swept = sweep(tmp_path / "attachments", time.time() + PARTIAL_GRACE_SECONDS + 1, None)
    assert swept.partials == 1 and not folder.exists()
