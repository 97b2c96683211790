"""Engine overhead of the files people send, the same on every platform: the text of a 10-page PDF (and a
DOCX of as much text) made into the user message's block (`describe_attachments`: parse, cap, clean, mark),
and a voice note made into its transcript (`VoiceNotes.hear`), the transcriber's own time excluded (one
that answers at once). Median and p90 of `--runs`.

    python tests/bench/documents_bench.py [--runs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from documents_kit import docx_bytes, pdf_bytes  # noqa: E402

from hermes_engine.agent.prompt import describe_attachments  # noqa: E402
from hermes_engine.attachments.voice import VoiceNotes  # noqa: E402
from hermes_engine.ports.inbound import Attachment, ChatKind, InboundMessage  # noqa: E402

LINE = "The quarterly figures show steady growth across regions and products"  # 69 characters


class Instant:
    """A transcriber that answers at once: what remains is the engine's own time."""

    model = "instant"

    async def transcribe(self, path: str, file_name: str, mime_type: str) -> str:
        return "remind me to call the bank tomorrow morning"


def _message(*attachments: Attachment) -> InboundMessage:
    return InboundMessage("telegram", "bot", ChatKind.DM, "1", "2", "", "3", attachments=attachments)


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    return f"median {statistics.median(ordered) * 1000:.2f} ms, p90 {ordered[int(len(ordered) * 0.9)] * 1000:.2f} ms"


async def _hear(notes: VoiceNotes, msg: InboundMessage, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        await notes.hear(msg)
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pdf = folder / "report.pdf"
        pdf.write_bytes(pdf_bytes(*[f"Page {n}: {LINE}" * 25 for n in range(1, 11)]))  # ~17,000 characters
        docx = folder / "report.docx"
        docx.write_bytes(docx_bytes(*[f"Page {n}: {LINE}" * 25 for n in range(1, 11)]))
        voice = folder / "voice.ogg"
        voice.write_bytes(b"OggS" + b"\x00" * 20_000)
        cases = {"10-page PDF": Attachment("document", "report.pdf", "application/pdf", pdf.stat().st_size, str(pdf)),
                 "DOCX, the same text": Attachment("document", "report.docx", "application/vnd.openxmlformats-"
                                                   "officedocument.wordprocessingml.document",
                                                   docx.stat().st_size, str(docx))}
        for name, attachment in cases.items():
            msg = _message(attachment)
            samples = []
            for _ in range(args.runs):
                started = time.perf_counter()
                block = describe_attachments(msg, pager=True)
                samples.append(time.perf_counter() - started)
            print(f"{name}: {len(block):,} characters to the model; {_ms(samples)}")
        notes = VoiceNotes(Instant())
        msg = _message(Attachment("voice", "voice.ogg", "audio/ogg", voice.stat().st_size, str(voice)))
        print(f"voice note to transcript, transcriber excluded: {_ms(asyncio.run(_hear(notes, msg, args.runs)))}")


if __name__ == "__main__":
    main()
