"""A scripted LLM on 127.0.0.1 that speaks OpenAI Chat Completions and Anthropic Messages, and serves
OpenAI-style `/v1/embeddings` (hashed bag-of-stems vectors; `embedding_failures` scripts errors) and
`/v1/audio/transcriptions` (multipart, as the real API; `transcripts` scripts the words heard,
`transcription_failures` errors served first).

The real SDKs talk to it over real HTTP, so tests cover the wire formats, the SDKs' own retry logic and
stream cuts the way production meets them, without patching any library. Replies come from a FIFO script,
then from an optional `responder` callable (route by content, e.g. judge vs worker by system prompt), then
from `default_reply`. Every request is recorded so tests assert on what the model was actually sent.

    async with FakeLLM() as fake:
        fake.script(Reply(text="hello there"), Reply(tool_calls=[("get_time", '{"tz": "UTC"}')]))
        fake.responder = lambda req: Reply(text="judged") if "judge" in req.system else None
        provider = OpenAIProvider("gpt-x", api_key="test", base_url=fake.openai_base_url)
        ...
        assert fake.requests[0].api == "openai"

It is also the model behind the benchmarks, so a reply without `delay` is written in a single socket write
(still several SSE events, hence several deltas on the client) and the access log is off.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import inspect
import itertools
import json
import math
import re
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import Stemmer
from aiohttp import web

from fakes.fake_speech import FakeSpeech
from fakes.loopback import LoopbackServer

Api = Literal["openai", "anthropic"]

# (name, arguments) or (name, arguments, id). A str argument is sent verbatim (malformed JSON included);
# a dict is JSON-encoded.
ToolCallSpec = tuple[str, str | dict] | tuple[str, str | dict, str]

_WORDS = re.compile(r"\s*\S+\s*", re.S)


@dataclass
class Reply:
    """One scripted answer to one HTTP request (an SDK retry consumes the next one).

    - `error`: answer with that HTTP status (`error_message` in the vendor's error body). `retry_after` adds
      `retry-after` and `retry-after-ms` headers: the SDKs treat `retry-after: 0` as "use your own backoff"
      (half a second and growing), so the millisecond header is what keeps retried tests instant.
    - `disconnect_after_chars`: cut the connection after that many characters of text (mid-stream when
      streaming, before any response otherwise).
    - `disconnect_after_chunks`: cut a streamed reply after that many content deltas (text pieces and
      tool-argument pieces alike, so a tool call can be cut half-received); a number beyond the reply's
      deltas cuts after its last event, the answer complete but the body never finished.
    - `before_cut`: awaited after the events were sent and before the connection is cut, so a test can
      hold the cut until the client shows the partial answer (no sleeps).
    - `stream_error`: after the text of a streamed reply, send an error event of that status's kind and end
      the stream (Anthropic's mid-stream `overloaded_error`).
    - `usage`: keys input (uncached), output, cache_read, cache_write; estimated from sizes when omitted.
    - `chunks` overrides the word-by-word split of `text` into deltas; `delay` sleeps between stream events
      (interruption tests); `stop_reason` overrides the vendor's finish/stop reason.
    - `at_limit`: the model stopped at the request's `max_tokens` (Anthropic's stop_reason "max_tokens",
      OpenAI's finish_reason "length"), having written exactly that many tokens unless `usage` says
      otherwise; with tool calls, the last call's arguments stop half-way, as the real APIs send them then.
    """

    text: str = ""
    tool_calls: Sequence[ToolCallSpec] = ()
    error: int | None = None
    error_message: str = ""
    retry_after: float | None = None
    disconnect_after_chars: int | None = None
    disconnect_after_chunks: int | None = None
    before_cut: Callable[[], Awaitable[object]] | None = None
    stream_error: int | None = None
    usage: dict[str, int] | None = None
    delay: float = 0.0
    stop_reason: str | None = None
    chunks: Sequence[str] | None = None
    at_limit: bool = False

    def text_chunks(self) -> list[str]:
        if self.chunks is not None:
            return [c for c in self.chunks if c]
        return _WORDS.findall(self.text) or ([self.text] if self.text else [])


@dataclass
class RecordedRequest:
    """What an SDK sent: `api` tells the wire format, `body` is the parsed JSON, header names are lower-case."""

    api: Api
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    served_seconds: float = 0.0  # the fake's own time on this request, so benchmarks can subtract it
    size: int = 0  # bytes of the body; the usage the fake reports counts a token for every 4 of them
    received: float = field(default_factory=time.monotonic)  # when it came (monotonic), for benchmarks

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools") or [])

    @property
    def system(self) -> str:
        """The system prompt as plain text, whichever wire format carried it."""
        if self.api == "anthropic":
            return _plain_text(self.body.get("system") or "")
        parts = [_plain_text(m.get("content")) for m in self.messages if m.get("role") in ("system", "developer")]
        return "\n".join(parts)

    @property
    def turn_tool_results(self) -> list[str]:
        """The tool results since the newest user message: what this turn's tools returned so far."""
        last_user = max((i for i, m in enumerate(self.messages) if m.get("role") == "user"), default=-1)
        return [m["content"] for m in self.messages[last_user + 1:] if m.get("role") == "tool"]

    @property
    def texts(self) -> list[str]:
        """The text of each message in order (tool calls and results have none), whichever wire format."""
        return [_plain_text(m.get("content")) for m in self.messages]

    @property
    def last_user_text(self) -> str:
        """Text of the newest user message (tool results excluded), handy for routing by content."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                text = _plain_text(message.get("content"))
                if text:
                    return text
        return ""


Responder = Callable[[RecordedRequest], Reply | str | None | Awaitable[Reply | str | None]]


def _plain_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


@dataclass
class TranscriptionRequest:
    """One upload to `/v1/audio/transcriptions`, as the server read its form."""

    model: str
    file_name: str
    content_type: str
    data: bytes
    fields: dict[str, str]


class FakeLLM(LoopbackServer):
    """The server. Use as `async with FakeLLM() as fake:` or call `start()` / `stop()` yourself."""

    def __init__(self, *, strict: bool = True) -> None:
        self.requests: list[RecordedRequest] = []
        self.responder: Responder | None = None
        self.default_reply: Reply = Reply(text="ok")
        # Rejects (HTTP 400) request shapes the real APIs reject, so translation bugs fail loudly here.
        self.strict = strict
        self._queue: deque[Reply] = deque()
        self._ids = itertools.count(1)
        # /v1/embeddings: the inputs of each call, and scripted failures served before any vectors
        # (an int = that HTTP status, "garbage" = a 200 whose body is not an embeddings list).
        self.embedding_inputs: list[list[str]] = []
        self.embedding_failures: deque[int | Literal["garbage"]] = deque()
        # /v1/audio/transcriptions: each upload received, the texts served in order (then
        # `default_transcript`), and HTTP statuses served before any text (429 with Retry-After: 0).
        self.transcriptions: list[TranscriptionRequest] = []
        self.transcripts: deque[str] = deque()
        self.default_transcript = ""
        self.transcription_failures: deque[int] = deque()
        self.speech = FakeSpeech()  # /v1/audio/speech

    # -- lifecycle ---------------------------------------------------------------------------------------

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/v1/audio/transcriptions", self._transcription)
        self.speech.mount(app)
        return app

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    # -- scripting ---------------------------------------------------------------------------------------

    def script(self, *replies: Reply | str) -> None:
        """Queue replies, served in order to whichever API asks next. A str is shorthand for Reply(text=...)."""
        self._queue.extend(Reply(text=r) if isinstance(r, str) else r for r in replies)

    @property
    def pending(self) -> int:
        return len(self._queue)

    def reset(self) -> None:
        self._queue.clear()
        self.requests.clear()
        self.responder = None

    def requests_for(self, api: Api) -> list[RecordedRequest]:
        return [r for r in self.requests if r.api == api]

    async def _next_reply(self, request: RecordedRequest) -> Reply:
        if self._queue:
            return self._queue.popleft()
        if self.responder is not None:
            reply = self.responder(request)
            if inspect.isawaitable(reply):
                reply = await reply
            if isinstance(reply, str):
                return Reply(text=reply)
            if reply is not None:
                return reply
        return self.default_reply

    # -- HTTP --------------------------------------------------------------------------------------------

    async def _embeddings(self, http: web.Request) -> web.Response:
        body = await http.json()
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        if not texts or not all(isinstance(t, str) for t in texts) or not body.get("model"):
            return _error_response("openai", 400, "input must be a string or a list of strings", None)
        self.embedding_inputs.append(texts)
        if self.embedding_failures:
            failure = self.embedding_failures.popleft()
            if failure == "garbage":
                return web.json_response({"object": "list", "data": "not vectors"})
            return _error_response("openai", failure, "", 0.0 if failure == 429 else None)
        data = []
        for i, text in enumerate(texts):
            vector = hashed_stems(text)
            packed = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
            data.append({"object": "embedding", "index": i,
                         "embedding": packed if body.get("encoding_format") == "base64" else vector})
        return web.json_response({"object": "list", "data": data, "model": body["model"],
                                  "usage": {"prompt_tokens": sum(len(t) // 4 for t in texts),
                                            "total_tokens": sum(len(t) // 4 for t in texts)}})

    async def _transcription(self, http: web.Request) -> web.Response:
        """OpenAI's transcription endpoint: a multipart form with `file` and `model`, answered `{"text": ...}`."""
        if not http.content_type.startswith("multipart/form-data"):
            return _error_response("openai", 400, "expected multipart/form-data", None)
        form = await http.post()
        upload, model = form.get("file"), form.get("model")
        if not isinstance(upload, web.FileField) or not isinstance(model, str) or not model:
            return _error_response("openai", 400, "file and model are required", None)
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        self.transcriptions.append(TranscriptionRequest(model, upload.filename, upload.content_type,
                                                        upload.file.read(), fields))
        if self.transcription_failures:
            status = self.transcription_failures.popleft()
            return _error_response("openai", status, "", 0.0 if status == 429 else None)
        text = self.transcripts.popleft() if self.transcripts else self.default_transcript
        if fields.get("response_format") == "text":
            return web.Response(text=text)
        return web.json_response({"text": text})

    async def _openai(self, http: web.Request) -> web.StreamResponse:
        return await self._timed(http, "openai")

    async def _anthropic(self, http: web.Request) -> web.StreamResponse:
        return await self._timed(http, "anthropic")

    async def _timed(self, http: web.Request, api: Api) -> web.StreamResponse:
        started = time.perf_counter()
        count = len(self.requests)
        try:
            return await self._handle(http, api)
        finally:
            if len(self.requests) > count:
                self.requests[count].served_seconds = time.perf_counter() - started

    async def _handle(self, http: web.Request, api: Api) -> web.StreamResponse:
        raw = await http.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return _error_response(api, 400, "request body is not JSON", None)
        request = RecordedRequest(api, http.path, body, {k.lower(): v for k, v in http.headers.items()}, size=len(raw))
        self.requests.append(request)
        problem = _validate(api, body) if self.strict else None
        if problem:
            return _error_response(api, 400, problem, None)
        reply = await self._next_reply(request)
        if reply.error is not None:
            return _error_response(api, reply.error, reply.error_message, reply.retry_after)
        usage = _usage(reply, len(raw), body)
        if request.stream:
            return await self._stream(http, api, request, reply, usage)
        if reply.disconnect_after_chars is not None:
            _cut(http)
            return web.Response()
        build = _openai_body if api == "openai" else _anthropic_body
        payload = build(reply, request, usage, next(self._ids))
        return web.Response(body=json.dumps(payload).encode(), content_type="application/json")

    async def _stream(self, http: web.Request, api: Api, request: RecordedRequest, reply: Reply,
                      usage: dict[str, int]) -> web.StreamResponse:
        events_for = _openai_events if api == "openai" else _anthropic_events
        events, cut = events_for(reply, request, usage, next(self._ids))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(http)
        try:
            if reply.delay <= 0:
                await response.write(b"".join(events))
            else:
                for event in events:
                    await response.write(event)
                    await asyncio.sleep(reply.delay)
        except ConnectionResetError:  # the client hung up (an interrupted turn): nothing left to send
            return response
        if cut:
            if reply.before_cut is not None:
                await reply.before_cut()
            _cut(http)
            return response
        await response.write_eof()
        return response


EMBEDDING_DIMENSIONS = 256
_STEMMER = Stemmer.Stemmer("english")


def hashed_stems(text: str) -> list[float]:
    """A deterministic unit vector: each word's Snowball stem hashed into one of `EMBEDDING_DIMENSIONS`
    buckets. Texts sharing stems point the same way; it proves the plumbing, not retrieval quality."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in re.findall(r"[^\W_]+", text.lower()):
        digest = hashlib.blake2b(_STEMMER.stemWord(word).encode(), digest_size=4).digest()
        vector[int.from_bytes(digest, "little") % EMBEDDING_DIMENSIONS] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def _cut(http: web.Request) -> None:
    """Drop the connection without finishing the body: the client sees an incomplete chunked read."""
    if http.transport is not None:
        http.transport.close()


# -- request validation (the mistakes the real APIs answer with 400) -------------------------------------


def _validate(api: Api, body: dict[str, Any]) -> str | None:
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    return _validate_anthropic(body, messages) if api == "anthropic" else _validate_openai(messages)


def _validate_anthropic(body: dict[str, Any], messages: list[Any]) -> str | None:
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: field required"
    if messages[0].get("role") != "user":
        return "messages: first message must use the user role"
    previous_tool_ids: set[str] = set()
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: must be user or assistant"
        if isinstance(content, str):
            if not content and i != len(messages) - 1:
                return f"messages.{i}: content must be non-empty"
            blocks: list[Any] = []
        elif isinstance(content, list) and content:
            blocks = content
        else:
            return f"messages.{i}.content: must be a non-empty string or list"
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and not block.get("text"):
                return f"messages.{i}: text content blocks must be non-empty"
            if kind == "tool_result" and block.get("tool_use_id") not in previous_tool_ids:
                return f"messages.{i}: tool_result {block.get('tool_use_id')!r} has no tool_use in the previous message"
            if kind == "tool_use" and not isinstance(block.get("input"), dict):
                return f"messages.{i}: tool_use.input must be an object"
        previous_tool_ids = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
    return None


def _validate_openai(messages: list[Any]) -> str | None:
    open_ids: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            open_ids = {c.get("id") for c in message.get("tool_calls") or []}
        elif role == "tool":
            if message.get("tool_call_id") not in open_ids:
                return (f"messages.[{i}].role: messages with role 'tool' must be a response to a preceding "
                        "message with 'tool_calls'")
        elif role not in ("system", "developer", "user"):
            return f"messages.[{i}].role: invalid role {role!r}"
    return None


# -- replies in both wire formats ------------------------------------------------------------------------


def _usage(reply: Reply, request_bytes: int, body: dict[str, Any]) -> dict[str, int]:
    given = reply.usage or {}
    output_guess = max(1, (len(reply.text) + sum(len(str(c[1])) for c in reply.tool_calls)) // 4)
    if reply.at_limit:
        output_guess = int(body.get("max_tokens") or body.get("max_completion_tokens") or output_guess)
    return {
        "input": int(given.get("input", max(1, request_bytes // 4))),
        "output": int(given.get("output", output_guess)),
        "cache_read": int(given.get("cache_read", 0)),
        "cache_write": int(given.get("cache_write", 0)),
    }


def _tool_calls(reply: Reply, prefix: str, n: int) -> list[tuple[str, str, str]]:
    """(id, name, raw arguments) for each scripted call."""
    calls = []
    for i, spec in enumerate(reply.tool_calls):
        name, args = spec[0], spec[1]
        call_id = spec[2] if len(spec) > 2 else f"{prefix}{n}_{i}"  # type: ignore[misc]
        calls.append((call_id, name, args if isinstance(args, str) else json.dumps(args)))
    if calls and reply.at_limit:  # the limit struck while the model wrote the last call's arguments
        call_id, name, args = calls[-1]
        calls[-1] = (call_id, name, args[: len(args) // 2])
    return calls


def _split_two(text: str) -> list[str]:
    """Arguments arrive in pieces on the real APIs; two pieces are enough to exercise accumulation."""
    half = len(text) // 2
    return [p for p in (text[:half], text[half:]) if p]


def _limit_chunks(reply: Reply) -> tuple[list[str], bool]:
    """The text deltas to send, and whether the connection is cut after them."""
    chunks = reply.text_chunks()
    limit = reply.disconnect_after_chars
    if limit is None:
        return chunks, False
    kept, sent = [], 0
    for chunk in chunks:
        if sent >= limit:
            break
        kept.append(chunk[: limit - sent])
        sent += len(kept[-1])
    return kept, True


class _Events(list[bytes]):
    """The SSE events of a streamed reply, knowing which of them carry content deltas."""

    def __init__(self, events: list[bytes]) -> None:
        super().__init__(events)
        self.deltas: list[int] = []  # positions of the content-delta events

    def delta(self, event: bytes) -> None:
        self.deltas.append(len(self))
        self.append(event)

    def cut_after(self, chunks: int | None) -> tuple[list[bytes], bool]:
        """All events, or those up to the `chunks`-th delta and a cut (`Reply.disconnect_after_chunks`)."""
        if chunks is None:
            return list(self), False
        if chunks >= len(self.deltas):
            return list(self), True
        return self[: self.deltas[chunks - 1] + 1 if chunks else self.deltas[0]], True


def _openai_usage(usage: dict[str, int]) -> dict[str, Any]:
    # OpenAI counts cache reads and writes inside prompt_tokens and breaks them out in the details.
    prompt = usage["input"] + usage["cache_read"] + usage["cache_write"]
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage["output"],
        "total_tokens": prompt + usage["output"],
        "prompt_tokens_details": {"cached_tokens": usage["cache_read"], "cache_write_tokens": usage["cache_write"]},
    }


def _openai_finish(reply: Reply) -> str:
    return reply.stop_reason or ("length" if reply.at_limit else "tool_calls" if reply.tool_calls else "stop")


def _sse_data(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _openai_events(reply: Reply, request: RecordedRequest, usage: dict[str, int],
                   n: int) -> tuple[list[bytes], bool]:
    """The SSE events of a streamed reply, and whether the connection is cut after them."""
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": request.model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse_data({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    texts, cut = _limit_chunks(reply)
    events = _Events([chunk({"role": "assistant", "content": ""})])
    for t in texts:
        events.delta(chunk({"content": t}))
    if cut:
        return events, True
    if reply.stream_error is not None:
        return events + [_sse_data(_openai_error(reply.stream_error, reply.error_message))], False
    for index, (call_id, name, args) in enumerate(_tool_calls(reply, "call_", n)):
        events.append(chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": ""}}]}))
        for piece in _split_two(args):
            events.delta(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    events.append(chunk({}, _openai_finish(reply)))
    if (request.body.get("stream_options") or {}).get("include_usage"):
        events.append(_sse_data({**base, "choices": [], "usage": _openai_usage(usage)}))
    events.append(b"data: [DONE]\n\n")
    return events.cut_after(reply.disconnect_after_chunks)


def _openai_body(reply: Reply, request: RecordedRequest, usage: dict[str, int], n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    calls = _tool_calls(reply, "call_", n)
    if calls:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": name, "arguments": args}}
                                 for i, name, args in calls]
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()), "model": request.model,
            "choices": [{"index": 0, "message": message, "finish_reason": _openai_finish(reply), "logprobs": None}],
            "usage": _openai_usage(usage)}


def _anthropic_stop(reply: Reply) -> str:
    return reply.stop_reason or ("max_tokens" if reply.at_limit else "tool_use" if reply.tool_calls else "end_turn")


def _anthropic_usage(usage: dict[str, int]) -> dict[str, int]:
    # Anthropic's input_tokens excludes cache reads and writes, which are reported beside it.
    return {"input_tokens": usage["input"], "output_tokens": usage["output"],
            "cache_read_input_tokens": usage["cache_read"], "cache_creation_input_tokens": usage["cache_write"]}


def _sse_event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: ".encode() + json.dumps(payload).encode() + b"\n\n"


def _anthropic_events(reply: Reply, request: RecordedRequest, usage: dict[str, int],
                      n: int) -> tuple[list[bytes], bool]:
    """The SSE events of a streamed reply, and whether the connection is cut after them."""
    start_usage = {**_anthropic_usage(usage), "output_tokens": 1}
    message = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": request.model, "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": start_usage}
    events = _Events([_sse_event("message_start", {"type": "message_start", "message": message}),
                      _sse_event("ping", {"type": "ping"})])
    texts, cut = _limit_chunks(reply)
    index = 0
    if texts or (reply.text and not cut):
        events.append(_sse_event("content_block_start", {"type": "content_block_start", "index": 0,
                                                         "content_block": {"type": "text", "text": ""}}))
        for t in texts:
            events.delta(_sse_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                            "delta": {"type": "text_delta", "text": t}}))
        if cut:
            return events, True
        events.append(_sse_event("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    elif cut:
        return events, True
    if reply.stream_error is not None:
        return events + [_sse_event("error", _anthropic_error(reply.stream_error, reply.error_message))], False
    for call_id, name, args in _tool_calls(reply, "toolu_", n):
        events.append(_sse_event("content_block_start", {
            "type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}}))
        for p in _split_two(args):
            events.delta(_sse_event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                            "delta": {"type": "input_json_delta", "partial_json": p}}))
        events.append(_sse_event("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    events.append(_sse_event("message_delta", {
        "type": "message_delta", "delta": {"stop_reason": _anthropic_stop(reply), "stop_sequence": None},
        "usage": {"output_tokens": usage["output"]}}))
    events.append(_sse_event("message_stop", {"type": "message_stop"}))
    return events.cut_after(reply.disconnect_after_chunks)


def _anthropic_body(reply: Reply, request: RecordedRequest, usage: dict[str, int], n: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    for call_id, name, args in _tool_calls(reply, "toolu_", n):
        try:
            parsed = json.loads(args)
        except ValueError:
            parsed = None
        # A non-streamed tool_use carries a parsed object, so malformed arguments cannot be shown verbatim.
        tool_input = parsed if isinstance(parsed, dict) else {"__raw_arguments__": args}
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": tool_input})
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": request.model, "content": content,
            "stop_reason": _anthropic_stop(reply), "stop_sequence": None, "usage": _anthropic_usage(usage)}


_ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                          404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                          529: "overloaded_error"}


def _anthropic_error(status: int, message: str) -> dict[str, Any]:
    kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message or f"fake error {status}"}}


def _openai_error(status: int, message: str) -> dict[str, Any]:
    kind = {429: "rate_limit_exceeded"}.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message or f"fake error {status}", "type": kind, "param": None, "code": kind}}


def _error_response(api: Api, status: int, message: str, retry_after: float | None) -> web.Response:
    payload = _anthropic_error(status, message) if api == "anthropic" else _openai_error(status, message)
    headers = {}
    if retry_after is not None:
        headers["retry-after"] = str(int(retry_after))
        headers["retry-after-ms"] = str(max(1, int(retry_after * 1000)))
    return web.Response(status=status, body=json.dumps(payload).encode(), content_type="application/json",
                        headers=headers)
