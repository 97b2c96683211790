"""Engine overhead of an inbound image, download to the model request: a person shares a screenshot in a
Slack DM and the real gateway, with the real Slack adapter (slack-bolt, aiohttp), takes the event from the
fake Slack, downloads the file with the bot token into the conversation's folder, reads its type from the
bytes and sends it to the fake LLM as image content; both fakes answer at once, on loopback, in this process.

Timed: from the event posted to the model request arriving at the fake LLM, for a message with the image and
for the same message without it (each run a DM of its own, so history stays the same); the difference is
what the image costs. Median and p90 of `--runs`.

    python tests/bench/inbound_image_bench.py [--runs 50] [--kb 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import struct
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from engine_harness import Engine, fake_llm_environment, make_profile  # noqa: E402
from fakes.fake_llm import FakeLLM, Reply  # noqa: E402
from fakes.fake_slack import FakeSlack  # noqa: E402
from slack_kit import BOT_TOKEN, SIGNING_SECRET, serve_slack  # noqa: E402


def noisy_png(kb: int) -> bytes:
    """A PNG of about `kb` KB that does not compress (a screenshot with photos in it)."""
    width = 512
    height = max(1, kb * 1024 // width)
    rng = random.Random(7)
    rows = b"".join(b"\x00" + rng.randbytes(width) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 1)) + chunk(b"IEND", b"")


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    return f"median {statistics.median(ordered) * 1000:.1f} ms, p90 {ordered[int(len(ordered) * 0.9)] * 1000:.1f} ms"


async def run(runs: int, kb: int) -> None:
    image = noisy_png(kb)
    async with FakeLLM() as llm, FakeSlack() as slack:
        os.environ.update(fake_llm_environment(llm))
        os.environ.update({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                           "SLACK_API_URL": slack.api_url})
        arrived: dict[str, float] = {}

        def respond(request) -> Reply:
            arrived.setdefault(request.last_user_text, time.perf_counter())
            return Reply(text="Seen.")

        llm.responder = respond
        with tempfile.TemporaryDirectory() as home:
            engine = await Engine(Path(home), make_profile(), platform="slack").start()
            served = await serve_slack(engine, events_from=slack)
            try:
                async def one(n: int, with_image: bool) -> float:
                    channel, text = f"D{n:06d}", f"what is wrong here? ({n})"
                    files = [slack.upload(f"Screenshot {n}.png", image, "image/png")] if with_image else None
                    started = time.perf_counter()
                    await slack.say("UALICE", channel, text, files=files)
                    await slack.wait_for(lambda: bool(slack.bot_messages(channel)))
                    key = next(k for k in arrived if f"({n})" in k)
                    return arrived[key] - started

                await one(0, True)  # imports, the first session, the first download: not measured
                await one(1, False)
                plain, pictured = [], []
                for n in range(2, 2 + 2 * runs, 2):
                    plain.append(await one(n, False))
                    pictured.append(await one(n + 1, True))
            finally:
                await served.close()
                await engine.stop()
    sent = sum(1 for r in llm.requests if "image" in str(r.body))
    print(f"inbound image of {len(image) / 1024:.0f} KB, event → model request ({runs} runs each, {sent} requests "
          f"with an image): with the image {_ms(pictured)}; the same message without it {_ms(plain)}; "
          f"the image's own cost, median {(statistics.median(pictured) - statistics.median(plain)) * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--kb", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(run(args.runs, args.kb))


if __name__ == "__main__":
    main()
