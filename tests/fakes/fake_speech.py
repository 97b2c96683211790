"""OpenAI's `POST /v1/audio/speech` on the fake LLM: real audio of the requested format, made with PyAV.

Each request is recorded (`requests`: model, voice, input, response_format). The recording is a short tone
whose length follows the input's, encoded as asked (`opus`: OGG/Opus, `mp3`, `wav`), or as `answer_format`
when set, as local servers that know one format do. `failures` scripts errors served first (an HTTP status
each), e.g. a 500 from an endpoint that is down.

    fake_llm.speech.answer_format = "mp3"   # the endpoint ignores response_format
    fake_llm.speech.failures.append(500)
"""

from __future__ import annotations

import io
import json
import math
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web

RATE = 24000
CODECS = {"opus": ("ogg", "libopus", 48000), "mp3": ("mp3", "libmp3lame", 24000), "wav": ("wav", "pcm_s16le", RATE)}
TYPES = {"opus": "audio/ogg", "mp3": "audio/mpeg", "wav": "audio/wav"}


@dataclass(frozen=True)
class SpeechRequest:
    model: str
    voice: str
    input: str
    response_format: str


class FakeSpeech:
    def __init__(self) -> None:
        self.requests: list[SpeechRequest] = []
        self.failures: deque[int] = deque()
        self.answer_format: str | None = None

    def mount(self, app: web.Application) -> None:
        app.router.add_post("/v1/audio/speech", self._speech)

    async def _speech(self, http: web.Request) -> web.Response:
        body: dict[str, Any] = await http.json()
        text, model = body.get("input"), body.get("model")
        if not isinstance(text, str) or not text or not model or not body.get("voice"):
            return _error(400, "model, voice and input are required")
        asked = str(body.get("response_format") or "mp3")
        self.requests.append(SpeechRequest(str(model), str(body["voice"]), text, asked))
        if self.failures:
            return _error(self.failures.popleft(), "the speech service failed")
        fmt = self.answer_format or asked
        if fmt not in CODECS:
            return _error(400, f"response_format {fmt} is not supported here")
        seconds = min(5.0, 0.2 + len(text) / 200)
        return web.Response(body=tone(fmt, seconds), content_type=TYPES[fmt])


def tone(fmt: str, seconds: float) -> bytes:
    """A 440 Hz tone of `seconds`, encoded as `fmt` (a key of CODECS)."""
    import av

    container, codec, rate = CODECS[fmt]
    out = io.BytesIO()
    with av.open(out, mode="w", format=container) as sink:
        stream = sink.add_stream(codec, rate=rate, layout="mono")
        frame_size = 960 if codec == "libopus" else 1152
        total = int(seconds * rate)
        for start in range(0, total, frame_size):
            n = min(frame_size, total - start)
            pcm = array("h", (int(8000 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(start, start + n)))
            frame = av.AudioFrame(format="s16", layout="mono", samples=n)
            frame.planes[0].update(pcm.tobytes())
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                sink.mux(packet)
        for packet in stream.encode(None):
            sink.mux(packet)
    return out.getvalue()


def _error(status: int, message: str) -> web.Response:
    payload = {"error": {"message": message, "type": "server_error", "code": None}}
    return web.Response(status=status, body=json.dumps(payload).encode(), content_type="application/json")
