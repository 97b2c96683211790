"""What `send_file` of a 1 MB file costs the gateway: the tool's own work and the shared outbound layer,
without the platform, and the whole upload through python-telegram-bot to the fake Telegram on loopback.

1. Gateway side: the `send_file` tool of the workspace feature (confined open, size check, read, type
   from the bytes, key) and `Outbound.send_file` (the chat's lane, the ledger's two writes in memory) to a
   transport that answers at once. Median and p90 of `--runs` sends, each a new file (new key).
2. End to end: the same tool through the real Telegram adapter (multipart `sendDocument`) to the fake Bot
   API, the fake's own handling time included.

    python tests/bench/send_file_bench.py [--runs 200] [--mb 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from adapters.delivery import Lanes, Outbound  # noqa: E402
from adapters.outbound import OutboundScheduler  # noqa: E402
from adapters.part_rendering import PartRenderer  # noqa: E402
from adapters.parts import Capabilities, InMemoryDeliveryLedger  # noqa: E402
from adapters.transport import NoTransport  # noqa: E402
from hermes_engine.config import WorkspaceSettings  # noqa: E402
from hermes_engine.ports.inbound import ReplyTarget  # noqa: E402
from hermes_engine.ports.reply import OutgoingFile  # noqa: E402
from hermes_engine.ports.tools import ToolContext  # noqa: E402
from hermes_engine.workspace.feature import WorkspaceFeature  # noqa: E402
from hermes_engine.workspace.sending import FileOutlets  # noqa: E402


class Instant:
    """A `FileTransport` that takes every file at once."""

    def max_file_bytes(self, media_type: str) -> int:
        return 50 * 1024 * 1024

    async def send_file(self, target: ReplyTarget, file: OutgoingFile) -> str:
        return "1"


class OutletOnOutbound:
    platform = "bench"

    def __init__(self, outbound: Outbound) -> None:
        self.outbound = outbound

    def max_file_bytes(self, media_type: str) -> int:
        return self.outbound.max_file_bytes(media_type)

    async def send_file(self, target: ReplyTarget, file: OutgoingFile, *, idempotency_key: str) -> bool:
        return await self.outbound.send_file(target, file, idempotency_key=idempotency_key)


def feature(home: Path, outlets: FileOutlets) -> WorkspaceFeature:
    return WorkspaceFeature(home, "bench", WorkspaceSettings(), admins=["alice"], toolsets=["files"],
                            outlets=outlets)


def fill(feature: WorkspaceFeature, ctx: ToolContext, runs: int, size: int) -> None:
    ws = feature.workspace_for(chat_kind=ctx.chat_kind, person_id=ctx.person_id, session_key=ctx.session_key)
    for i in range(runs):
        (ws.root / f"f{i}.bin").write_bytes(os.urandom(16) + b"\x00" * (size - 16))


def summary(times: list[float]) -> str:
    times = sorted(times)
    p90 = times[int(len(times) * 0.9) - 1]
    return f"median {statistics.median(times) * 1000:.2f} ms, p90 {p90 * 1000:.2f} ms"


async def gateway_side(runs: int, size: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        caps = Capabilities(max_message_length=4000, edit_interval_seconds=0.0)
        outbound = Outbound(NoTransport(), PartRenderer(lambda text: text, caps, platform="bench"),
                            OutboundScheduler(0.0), InMemoryDeliveryLedger(), lanes=Lanes(0.0), files=Instant())
        outlets = FileOutlets()
        outlets.add(OutletOnOutbound(outbound))
        f = feature(Path(tmp), outlets)
        ctx = ToolContext(bot="bench", session_id=1, session_key="bench:dm:alice", user_id="alice", is_admin=True,
                          target=ReplyTarget("bench", "acct", "c1", reply_to_id="m1"))
        fill(f, ctx, runs, size)
        times = []
        for i in range(runs):
            started = time.perf_counter()
            result = await f.send_file(ctx, f"f{i}.bin")
            times.append(time.perf_counter() - started)
            assert not result.is_error and result.content.startswith("Sent"), result.content
        await outbound.scheduler.stop()
        return summary(times)


async def through_telegram(runs: int, size: int) -> str:
    from fakes.fake_telegram import FakeTelegram

    from adapters.telegram import PLATFORM
    from hermes_engine.config import Settings

    with tempfile.TemporaryDirectory() as tmp:
        async with FakeTelegram() as telegram:
            os.environ["TELEGRAM_BOT_TOKEN"] = telegram.token
            os.environ["TELEGRAM_API_BASE_URL"] = telegram.base_url
            options = PLATFORM.parse_options({"edit_interval_seconds": 0.0, "group_interval_seconds": 0.0})

            class NoEngine:
                """The adapter only sends here: nothing asks the engine."""

                bot = "bench"

                def knows_command(self, name: str) -> bool:
                    return False

            adapter = PLATFORM.build(NoEngine(), Settings(home=Path(tmp)), options, None, os.environ)  # type: ignore[arg-type]
            await adapter.bot.initialize()
            outlets = FileOutlets()
            outlets.add(adapter)
            f = feature(Path(tmp), outlets)
            ctx = ToolContext(bot="bench", session_id=1, session_key="bench:dm:alice", user_id="alice",
                              is_admin=True, target=ReplyTarget("telegram", "acct", "4242", reply_to_id=None))
            fill(f, ctx, runs, size)
            times = []
            for i in range(runs):
                started = time.perf_counter()
                result = await f.send_file(ctx, f"f{i}.bin")
                times.append(time.perf_counter() - started)
                assert not result.is_error, result.content
            assert len([m for m in telegram.chat(4242).bot_messages if m.file]) == runs
            await adapter.scheduler.stop()
            await adapter.bot.shutdown()
            return summary(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--mb", type=float, default=1.0)
    args = parser.parse_args()
    size = int(args.mb * 1024 * 1024)
    print(f"send_file of {args.mb:g} MB, {args.runs} sends")
    print(f"  gateway side (tool + outbound layer, no platform): {asyncio.run(gateway_side(args.runs, size))}")
    print(f"  through python-telegram-bot to the fake Telegram:  {asyncio.run(through_telegram(args.runs, size))}")


if __name__ == "__main__":
    main()
