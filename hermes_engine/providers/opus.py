"""Any audio the speech endpoint gives, as OGG/Opus: decoded and encoded with PyAV (FFmpeg's libraries).

Endpoints asked for `opus` mostly answer OGG/Opus already, which passes through untouched; some give MP3 or
WAV whatever is asked (local servers), and Telegram shows only OGG/Opus as a voice bubble. The audio is
resampled to 48 kHz mono, what Opus and Telegram's voice notes use.
"""

from __future__ import annotations

import io

from hermes_engine.ports.speech import Speech, SpeechError

__all__ = ["OGG_MAGIC", "as_ogg_opus"]

OGG_MAGIC = b"OggS"
RATE = 48000


def as_ogg_opus(data: bytes) -> Speech:
    """The recording in `data` as OGG/Opus, with its duration; raises `SpeechError` when it is not audio."""
    import av

    try:
        return _transcode(data) if not data.startswith(OGG_MAGIC) else Speech(data, _duration(data))
    except (av.FFmpegError, ValueError, IndexError) as exc:
        raise SpeechError(f"The speech endpoint's audio could not be read: {exc}") from None


def _duration(data: bytes) -> float:
    import av

    with av.open(io.BytesIO(data), mode="r") as source:
        return float(source.duration or 0) / av.time_base if source.duration else 0.0


def _transcode(data: bytes) -> Speech:
    import av

    out = io.BytesIO()
    samples = 0
    with av.open(io.BytesIO(data), mode="r") as source, av.open(out, mode="w", format="ogg") as sink:
        audio = source.streams.audio[0]
        stream = sink.add_stream("libopus", rate=RATE, layout="mono")
        resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
        for frame in source.decode(audio):
            for converted in resampler.resample(frame):
                samples += converted.samples
                for packet in stream.encode(converted):
                    sink.mux(packet)
        for converted in resampler.resample(None):
            samples += converted.samples
            for packet in stream.encode(converted):
                sink.mux(packet)
        for packet in stream.encode(None):
            sink.mux(packet)
    return Speech(out.getvalue(), samples / RATE)
