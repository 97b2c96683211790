"""Files people send stream to disk, never whole in memory: ten 20 MB files arriving at once.

Ten messages' files are fetched concurrently through `adapters.downloads.Downloads` (what the Slack and
Discord adapters use, and Telegram's stream) from a loopback file server in a process of its own, so only
the gateway side's memory is counted. Reported: the resident memory's peak above where it started (the
kernel's high-water mark, reset before the run), the wall time and the throughput.

    python tests/bench/downloads_bench.py [--files 10] [--mb 20]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from adapters.downloads import Downloads, Offered  # noqa: E402

PIECE = b"\x5a" * (64 * 1024)


def serve(port: int, size: int) -> None:
    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()  # no declared size: the cap is checked while streaming
        await response.prepare(request)
        for _ in range(size // len(PIECE)):
            await response.write(PIECE)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/f/{n}", handle)
    web.run_app(app, host="127.0.0.1", port=port, print=None, handle_signals=False)


def status(field: str) -> int:
    """A /proc/self/status figure in kB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak() -> None:
    """Start the kernel's high-water mark of resident memory again from the current figure."""
    Path("/proc/self/clear_refs").write_text("5")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_for(port: int) -> None:
    for _ in range(100):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError("the file server did not start")


async def run(files: int, mb: int) -> None:
    port = free_port()
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(port, mb * 1024 * 1024), daemon=True)
    server.start()
    try:
        await wait_for(port)
        with tempfile.TemporaryDirectory() as home:
            downloads = Downloads(Path(home), limit_mb=mb + 1, proxy_for=lambda url: None)
            warm = [Offered("document", "warm.bin", f"http://127.0.0.1:{port}/f/warm")]
            await downloads.fetch_all(warm, "bench:warm", "0")  # imports, the first session: not measured
            reset_peak()
            before = status("VmRSS")
            started = time.perf_counter()
            results = await asyncio.gather(*(
                downloads.fetch_all([Offered("document", f"file{n}.bin", f"http://127.0.0.1:{port}/f/{n}")],
                                    f"bench:{n}", str(n)) for n in range(files)))
            took = time.perf_counter() - started
            peak = status("VmHWM")
            sizes = [r[0].attachment.size for r in results]
            assert all(s == mb * 1024 * 1024 for s in sizes), sizes
    finally:
        server.terminate()
        server.join()
    total = files * mb
    print(f"{files} files of {mb} MB at once: {took:.2f} s ({total / took:.0f} MB/s); resident memory "
          f"{before / 1024:.1f} MB before, peak +{(peak - before) / 1024:.1f} MB "
          f"({(peak - before) / 1024 / total * 100:.2f}% of the {total} MB received)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--mb", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(run(args.files, args.mb))


if __name__ == "__main__":
    main()
