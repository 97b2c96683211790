"""The core loop: model call → tools (in parallel, results in call order) → repeat, until text.

Every model call and tool result is persisted as soon as it exists, so a crash loses at most the step in
flight; the store keeps tool-call arguments and results with secrets redacted (see `tool_record`).
Cancellation (a `/stop`, shutdown) cancels the in-flight model call; a half-streamed answer never enters
history, and tool calls that were cut short get an explicit "interrupted" result so the history stays valid
for every provider.

Deltas go out as they arrive, but a call whose stream broke is asked again or handed to a fallback by the
router, which then says `Restart`: the text this call had streamed is taken back (`on_restart`, then the
text of the turn's earlier calls is streamed again), so the person sees the partial answer turn into the
complete one rather than two answers glued together. Only a completed response enters history or runs tools.

A response cut at the model's output limit is not the end of the answer: the model goes on from it in the
same reply, and a tool call it cut is not run (`long_answers`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from hermes_engine.agent.long_answers import (
    CUT_NOTE,
    MAX_CONTINUATIONS,
    answer_text,
    at_limit,
    part,
    parts_before_end,
    without_cut_calls,
)
from hermes_engine.agent.prompt import for_history, for_this_turn
from hermes_engine.agent.tool_record import as_kept, record
from hermes_engine.errors import EmptyAnswer
from hermes_engine.ports.conversation import Message, ToolCall, Usage
from hermes_engine.ports.history import SessionHistory
from hermes_engine.ports.models import CallHook, Completed, ModelRequest, ModelResponse, Restart, Router, TextDelta
from hermes_engine.ports.tools import ToolContext, Tools
from hermes_engine.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

INTERRUPTED_RESULT = "[interrupted: the turn was stopped before this tool finished]"


Persist = Callable[[Message, Usage | None, str | None], Awaitable[None]]
OnDelta = Callable[[str], Awaitable[None]]
OnRestart = Callable[[], Awaitable[None]]  # forget every delta streamed so far


@dataclass
class TurnResult:
    final_text: str
    new_messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    tool_calls: int = 0
    tool_iterations: int = 0
    model_calls: int = 0
    budget_exhausted: bool = False
    engine_seconds: float = 0.0  # time not spent waiting on the model
    model_seconds: float = 0.0


@dataclass
class AgentLoop:
    tools: ToolRegistry
    max_iterations: int = 90
    max_output_tokens: int | None = None  # None: each model's own maximum (`providers.output_limits`)
    budget_warning_at: int = 5  # iterations left when the budget note is injected

    async def run(self, *, router: Router, system: str, history: SessionHistory | list[Message],
                  user: Message | None, ctx: ToolContext, persist: Persist, on_delta: OnDelta | None = None,
                  on_restart: OnRestart | None = None, purpose: str = "turn",
                  context: CallHook | None = None, tools: Tools | None = None) -> TurnResult:
        """Run one turn. Everything the turn appends goes to `history` (a plain list is run on as a detached
        history, so it is extended in place); `context` (compression) may give it a new view before each
        model call, and each call sends the view as it is then. `on_restart` takes back the streamed deltas.
        `tools`: the session's frozen tool list, when it has one (else the loop's own)."""
        if not isinstance(history, SessionHistory):
            history = SessionHistory(history)
        result = TurnResult(final_text="")
        started = time.perf_counter()
        this_turn = None
        if user is not None:
            await persist(for_history(user), None, None)
            this_turn = for_this_turn(user)
            history.append(this_turn)
            result.new_messages.append(for_history(user))
        try:
            streamed = _Streamed(on_delta, on_restart)
            await self._iterate(router, system, history, ctx, persist, streamed, purpose, result, context,
                                    self.tools if tools is None else tools)
        finally:
            if this_turn is not None and user is not None:
                history.swap(this_turn, for_history(user))  # the private note was for this turn only
        result.engine_seconds = time.perf_counter() - started - result.model_seconds
        return result

    async def _iterate(self, router: Router, system: str, history: SessionHistory, ctx: ToolContext,
                       persist: Persist, streamed: _Streamed, purpose: str, result: TurnResult,
                       context: CallHook | None, tools: Tools) -> None:
        schemas = tools.schemas()
        empty_retries = 0
        cut_calls = 0  # responses in a row cut while writing tool calls
        for iteration in range(1, self.max_iterations + 1):
            messages = tuple(history.view() if context is None else await context.before_call(history, router))
            room = context.output_room() if context is not None else None
            request = ModelRequest(system=system, messages=messages, tools=schemas,
                                   max_tokens=_at_most(self.max_output_tokens, room), purpose=purpose)
            call_started = time.perf_counter()
            response = await self._call_model(router, request, streamed)
            result.model_seconds += time.perf_counter() - call_started
            if context is not None:
                context.after_call(request, response)
            result.model_calls += 1
            result.usage.add(response.usage)
            if response.tool_calls and at_limit(response):
                cut_calls += 1
                await self._refuse_cut_calls(response, history, result, persist)
                if cut_calls <= MAX_CONTINUATIONS:
                    continue
                result.final_text = CUT_NOTE
                await self._append(history, result, persist, Message(role="assistant", content=CUT_NOTE), None, None)
                break
            cut_calls = 0
            if not response.tool_calls:
                parts = parts_before_end(history.view())
                if not response.text.strip() and not parts:
                    empty_retries += 1
                    if empty_retries <= 1:
                        log.warning("model returned an empty answer; asking again")
                        continue
                    log.warning("model returned empty answers twice")
                    text = "I could not produce an answer this time. Please rephrase or try again."
                    response.text = text
                elif at_limit(response) and response.text.strip():
                    if parts < MAX_CONTINUATIONS:
                        await self._append(history, result, persist, part(response), response.usage, response.model)
                        continue
                    log.warning("answer still at the output limit after %d continuations", parts)
                    response.text += f"\n\n{CUT_NOTE}"
                await self._append(history, result, persist, Message(role="assistant", content=response.text),
                                   response.usage, response.model)
                result.final_text = answer_text(history.view())
                break
            result.tool_iterations += 1
            assistant = Message(role="assistant", content=response.text, tool_calls=tuple(response.tool_calls))
            await self._append(history, result, persist, assistant, response.usage, response.model)
            left = self.max_iterations - iteration
            await self._run_tools(response.tool_calls, ctx, history, result, persist, left, tools)
        else:
            result.budget_exhausted = True
            result.final_text = (f"I reached this turn's limit of {self.max_iterations} steps before finishing. "
                                 "Tell me to continue if you want me to go on.")
            await self._append(history, result, persist, Message(role="assistant", content=result.final_text),
                               None, None)

    async def _call_model(self, router: Router, request: ModelRequest, streamed: _Streamed) -> ModelResponse:
        response: ModelResponse | None = None
        stream = router.stream(request)
        try:
            async for event in stream:
                if isinstance(event, TextDelta):
                    await streamed.push(event.text)
                elif isinstance(event, Restart):
                    await streamed.restart()
                elif isinstance(event, Completed):
                    response = event.response
        finally:
            await stream.aclose()
        if response is None:
            raise EmptyAnswer("the model stream ended without a completed response")
        streamed.call_completed()
        return response

    async def _refuse_cut_calls(self, response: ModelResponse, history: SessionHistory, result: TurnResult,
                                persist: Persist) -> None:
        log.warning("model output reached its limit inside a tool call; its calls are not run")
        assistant, refusals = without_cut_calls(response)
        await self._append(history, result, persist, assistant, response.usage, response.model)
        for refusal in refusals:
            await self._append(history, result, persist, refusal, None, None)

    async def _run_tools(self, calls: list[ToolCall], ctx: ToolContext, history: SessionHistory,
                         result: TurnResult, persist: Persist, iterations_left: int, tools: Tools) -> None:
        """Run the calls in parallel. Each result is persisted the moment its tool finishes (a crash then
        never runs a finished tool again, however long its neighbours take); the history gets them in
        call order."""
        async def run(call: ToolCall) -> Message:
            started = time.monotonic()
            outcome = await tools.call(call, ctx)
            took = time.monotonic() - started
            content = outcome.content  # already cut to size by the registry
            if call is calls[-1] and iterations_left <= self.budget_warning_at:
                content += (f"\n\n[budget: {iterations_left} model calls left in this turn; "
                            "finish the task or summarise where you are]")
            message = Message(role="tool", content=content, tool_call_id=call.id, tool_name=call.name,
                              is_error=outcome.is_error, images=outcome.images,
                              meta=record(call, len(outcome.content), took))
            await persist(as_kept(message), None, None)
            return message

        tasks = [asyncio.ensure_future(run(call)) for call in calls]
        done_upto = 0
        try:
            for task in tasks:
                message = await task
                history.append(message)
                result.new_messages.append(message)
                result.tool_calls += 1
                done_upto += 1
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            # Keep the history valid: every tool call gets a result, even when cut short. A result already
            # persisted is kept as it is.
            for call, task in zip(calls[done_upto:], tasks[done_upto:], strict=True):
                if task.done() and not task.cancelled() and task.exception() is None:
                    history.append(task.result())
                    result.new_messages.append(task.result())
                    continue
                message = Message(role="tool", content=INTERRUPTED_RESULT, tool_call_id=call.id,
                                  tool_name=call.name, is_error=True)
                await asyncio.shield(self._append(history, result, persist, message, None, None))
            raise

    @staticmethod
    async def _append(history: SessionHistory, result: TurnResult, persist: Persist, message: Message,
                      usage: Usage | None, model: str | None) -> None:
        await persist(as_kept(message), usage, model)
        history.append(message)
        result.new_messages.append(message)


def _at_most(*limits: int | None) -> int | None:
    """The lowest of the limits that are set (None: none is)."""
    given = [limit for limit in limits if limit is not None]
    return min(given) if given else None


class _Streamed:
    """The deltas of one turn on their way out. `restart` takes back those of the call in flight: the reply
    forgets everything (`on_restart`) and is given the earlier calls' text again."""

    def __init__(self, on_delta: OnDelta | None, on_restart: OnRestart | None) -> None:
        self._on_delta = on_delta
        self._on_restart = on_restart
        self._earlier = ""  # what the completed calls of this turn streamed
        self._call = ""  # what the call in flight streamed so far

    async def push(self, text: str) -> None:
        if self._on_delta is not None and text:
            self._call += text
            await self._on_delta(text)

    async def restart(self) -> None:
        self._call = ""
        if self._on_restart is not None:
            await self._on_restart()
            if self._earlier and self._on_delta is not None:
                await self._on_delta(self._earlier)

    def call_completed(self) -> None:
        self._earlier += self._call
        self._call = ""


def repair_history(messages: list[Message]) -> list[Message]:
    """Make a stored history valid for providers after a crash: every assistant tool call gets a result
    (an "interrupted" one where the process died before the tool finished)."""
    repaired: list[Message] = []
    pending: dict[str, ToolCall] = {}

    def flush() -> None:
        for call in pending.values():
            repaired.append(Message(role="tool", content=INTERRUPTED_RESULT, tool_call_id=call.id,
                                    tool_name=call.name, is_error=True))
        pending.clear()

    for message in messages:
        if message.role == "tool":
            if message.tool_call_id in pending:
                pending.pop(message.tool_call_id)
                repaired.append(message)
            continue  # an orphaned result: its call is gone, drop it
        flush()
        repaired.append(message)
        if message.role == "assistant":
            pending = {c.id: c for c in message.tool_calls}
    flush()
    return repaired
