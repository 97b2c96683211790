"""Sandbox overhead: one command in a fresh bwrap sandbox against the same command as a bare subprocess.

    python tests/bench/sandbox_bench.py [--runs 200] [--network]

Both run `/bin/sh -c true` and read its output to the end; the difference is what the sandbox costs a
terminal call (namespaces, mounts, the uid drop, the limits; with `--network`, attaching slirp4netns too).
Target: median overhead < 50 ms.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hermes_engine.workspace import sandbox, sandbox_network  # noqa: E402
from hermes_engine.workspace.space import Workspace  # noqa: E402

TARGET_MS = 50.0


def timed(action) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--network", action="store_true", help="the profile allows a network (slirp4netns)")
    args = parser.parse_args()
    reason = sandbox.unavailable_reason() or (sandbox_network.unavailable_reason() if args.network else None)
    if reason:
        print(f"cannot measure: {reason}")
        return 2
    with tempfile.TemporaryDirectory() as home:
        ws = Workspace(Path(home) / "ws", 10 * 1024 * 1024).ensure()
        limits = sandbox.Limits(seconds=30)
        bare, boxed = [], []
        for _ in range(args.runs):  # interleaved, so load on the machine hits both alike
            bare.append(timed(lambda: subprocess.run(["/bin/sh", "-c", "true"], capture_output=True, check=True)))
            boxed.append(timed(lambda: sandbox.run(ws.root, "true", limits, network=args.network)))
    b, s = statistics.median(bare), statistics.median(boxed)
    p90 = statistics.quantiles(boxed, n=10)[-1] - statistics.quantiles(bare, n=10)[-1]
    print(f"bare subprocess: median {b:.1f} ms; sandboxed: median {s:.1f} ms")
    print(f"overhead: median {s - b:.1f} ms, p90 {p90:.1f} ms (target < {TARGET_MS:.0f} ms)")
    return 0 if s - b < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
