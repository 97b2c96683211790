"""Tool registry: a tool is a typed function; its schema comes from the signature and docstring.

Schemas are paid for on every request, so they are kept compact: the first docstring paragraph is the
description, `Args:` lines describe parameters, and nothing else is sent.

A tool never holds up the event loop every chat shares: a plain (sync) function runs in one of a few
worker threads, an async one on the loop. Each call has a time limit (the tool's own, `DEFAULT_TIME_LIMIT`
unless it declares one) and a result cut at `MAX_RESULT_CHARS`; a call over its limit becomes an error
result the model reads, and the turn goes on. A thread cannot be killed, so a sync tool must also bound
its own work (see `calculate`): past the limit its thread runs on, but nobody waits for it.

Before the call the arguments are checked against the tool's declared types and coerced where that loses
nothing (`tools/arguments.py`); arguments that do not fit reach the model as an error result instead.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin, overload

from hermes_engine.errors import MalformedToolArguments, UnknownTool
from hermes_engine.ports.conversation import ToolCall
from hermes_engine.ports.tools import Tool, ToolContext, ToolResult, ToolSchema, ToolTimedOut
from hermes_engine.tools.arguments import Arguments

DEFAULT_TIME_LIMIT = 60.0  # seconds a tool call may take unless the tool declares its own limit
MAX_RESULT_CHARS = 50_000  # a longer result is cut: it would only crowd the context window
TOOL_THREADS = 4  # sync tools running at once in this process; more wait for a free thread
GIL_SWITCH_SECONDS = 0.0002

_threads: ThreadPoolExecutor | None = None


def _tool_threads() -> ThreadPoolExecutor:
    """The process's tool threads, made on first use.

    They share the GIL with the event loop, which gives it up at every wait for I/O, hundreds of times a
    turn, and by default gets it back only after the holder has run 5 ms: one CPU-bound tool would add up
    to a second to every other chat's reply. Once tool threads exist, the GIL changes hands every 0.2 ms."""
    global _threads
    if _threads is None:
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_SECONDS))
        _threads = ThreadPoolExecutor(max_workers=TOOL_THREADS, thread_name_prefix="hermes-tool")
    return _threads


@dataclass(frozen=True)
class FunctionTool:
    """A `Tool` made of a callable (a typed function through `@tool`, or a JSON schema and a callable)."""

    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., Any]
    toolset: str
    context_param: str | None = None
    time_limit: float = DEFAULT_TIME_LIMIT
    # What the call takes, as a validator: from the signature for `@tool`, else built from `parameters`.
    declared: Arguments | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.declared is None:
            object.__setattr__(self, "declared", Arguments.of_schema(self.name, self.parameters))

    @property
    def schema(self) -> ToolSchema:
        return ToolSchema(self.name, self.description, self.parameters)

    async def invoke(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Run the call; `ToolTimedOut` when it is over the time limit, `MalformedToolArguments` (and no call)
        when the arguments do not fit the declared ones."""
        assert self.declared is not None  # made in __post_init__
        kwargs = self.declared.check(arguments)
        if self.context_param:
            kwargs[self.context_param] = ctx
        deadline = asyncio.timeout(self.time_limit)
        try:
            return await self._run(kwargs, deadline)
        except TimeoutError:
            if not deadline.expired():
                raise  # the tool's own timeout (e.g. a remote call): reported like any other failure
            raise ToolTimedOut(f"Error: {self.name} did not finish within its time limit of {self.time_limit:g} s "
                               "and was given up; its result is lost. Try a smaller request.") from None

    async def _run(self, kwargs: dict[str, Any], deadline: asyncio.Timeout) -> ToolResult:
        """The call itself; a sync tool runs in a tool thread, in a copy of this context (as `asyncio.to_thread`
        gives one)."""
        async with deadline:
            if inspect.iscoroutinefunction(self.func):
                return as_result(await self.func(**kwargs))
            loop = asyncio.get_running_loop()
            call = functools.partial(contextvars.copy_context().run, _call_sync, self.func, kwargs)
            result = await loop.run_in_executor(_tool_threads(), call)
            return as_result(await result) if inspect.isawaitable(result) else result


_ARG_LINE = re.compile(r"^\s{2,}(\w+)\s*(?:\([^)]*\))?:\s*(.+)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    doc = inspect.cleandoc(doc or "")
    summary = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    params: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args:
            if line and not line.startswith(" "):
                break
            match = _ARG_LINE.match(line)
            if match:
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current and line.strip():
                params[current] += " " + line.strip()
    return summary, params


def _json_type(annotation: Any) -> tuple[dict[str, Any], bool]:
    """JSON schema for a type hint, and whether None is allowed."""
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        optional = len(args) < len(get_args(annotation))
        schema, _ = _json_type(args[0]) if len(args) == 1 else ({}, False)
        return schema, optional
    if origin is Literal:
        values = list(get_args(annotation))
        return {"type": "string" if all(isinstance(v, str) for v in values) else "integer", "enum": values}, False
    if origin in (list, tuple, set):
        item_args = get_args(annotation)
        item = _json_type(item_args[0])[0] if item_args else {}
        return {"type": "array", "items": item} if item else {"type": "array"}, False
    if origin is dict or annotation is dict:
        return {"type": "object"}, False
    mapping = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if annotation in mapping:
        return {"type": mapping[annotation]}, False
    return {}, False


def as_result(value: Any) -> ToolResult:
    """What a tool returned, as the model reads it: text, cut at `MAX_RESULT_CHARS`."""
    if isinstance(value, ToolResult):
        result = value
    elif isinstance(value, str):
        result = ToolResult(value)
    else:
        result = ToolResult(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))
    if len(result.content) <= MAX_RESULT_CHARS:
        return result
    cut = f"{result.content[:MAX_RESULT_CHARS]}\n[cut: the result had {len(result.content):,} characters]"
    return ToolResult(cut, result.is_error, result.images)


def _call_sync(func: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """In a worker thread: the call and the rendering of its result (a big result is costly to render)."""
    result = func(**kwargs)
    return result if inspect.isawaitable(result) else as_result(result)


@overload
def tool(func: Callable[..., Any], *, name: str | None = None, toolset: str = "core",
         time_limit: float = DEFAULT_TIME_LIMIT) -> FunctionTool: ...


@overload
def tool(func: None = None, *, name: str | None = None, toolset: str = "core",
         time_limit: float = DEFAULT_TIME_LIMIT) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(func: Callable[..., Any] | None = None, *, name: str | None = None, toolset: str = "core",
         time_limit: float = DEFAULT_TIME_LIMIT) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a typed function into a `Tool`. Use as `@tool` or `@tool(toolset="memory")`; `time_limit` in
    seconds (a sub-agent needs longer than a lookup)."""

    def build(fn: Callable[..., Any]) -> FunctionTool:
        summary, arg_docs = _parse_docstring(fn.__doc__ or "")
        hints = typing.get_type_hints(fn)
        properties: dict[str, Any] = {}
        required: list[str] = []
        fields: dict[str, Any] = {}
        needed: list[str] = []  # no default: a call without it could not be made
        context_param = None
        for pname, param in inspect.signature(fn).parameters.items():
            annotation = hints.get(pname, str)
            if annotation is ToolContext:
                context_param = pname
                continue
            fields[pname] = annotation
            if param.default is inspect.Parameter.empty:
                needed.append(pname)
            schema, optional = _json_type(annotation)
            schema = dict(schema)
            if pname in arg_docs:
                schema["description"] = arg_docs[pname]
            properties[pname] = schema
            if param.default is inspect.Parameter.empty and not optional:
                required.append(pname)
        parameters: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            parameters["required"] = required
        tool_name = name or fn.__name__
        return FunctionTool(tool_name, summary, parameters, fn, toolset, context_param, time_limit,
                    Arguments(tool_name, fields, needed))

    return build(func) if func is not None else build


class ToolRegistry:
    """All tools known to the process; a bot profile selects toolsets from it."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools or ():
            self.register(t)

    def register(self, t: Tool) -> Tool:
        if t.name in self._tools and self._tools[t.name] is not t:
            raise ValueError(f"tool {t.name!r} is registered twice")
        self._tools[t.name] = t
        return t

    def unregister(self, name: str) -> None:
        """For tools whose list changes (an MCP server's); loaded sessions keep the copy they took."""
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def select(self, toolsets: list[str]) -> ToolRegistry:
        """A registry holding only the tools of the given toolsets (or tool names), in a stable order."""
        wanted = set(toolsets)
        chosen = [t for t in self._tools.values() if t.toolset in wanted or t.name in wanted]
        return ToolRegistry(sorted(chosen, key=lambda t: t.name))

    def schemas(self) -> tuple[ToolSchema, ...]:
        return tuple(t.schema for t in sorted(self._tools.values(), key=lambda t: t.name))

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    async def call(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Run one tool call. Never raises: a failure becomes an error result the model can read."""
        try:
            t = self._tools.get(call.name)
            if t is None:
                raise UnknownTool(f"Unknown tool {call.name!r}. Available: {', '.join(sorted(self._tools))}.")
            arguments = parse_arguments(call)
            return await t.invoke(arguments, ctx)
        except asyncio.CancelledError:
            raise
        except (UnknownTool, MalformedToolArguments, ToolTimedOut) as exc:
            return ToolResult(str(exc), is_error=True)
        except Exception as exc:  # a tool that raises reports to the model instead of crashing the turn
            return ToolResult(f"Error: {type(exc).__name__}: {exc}", is_error=True)


def parse_arguments(call: ToolCall) -> dict[str, Any]:
    raw = call.arguments.strip() or "{}"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise MalformedToolArguments(
            f"Error: the arguments for {call.name} are not valid JSON ({exc.msg} at position {exc.pos}). "
            f"Call the tool again with a JSON object."
        ) from None
    if not isinstance(value, dict):
        raise MalformedToolArguments(f"Error: the arguments for {call.name} must be a JSON object.")
    return value


AsyncToolFunc = Callable[..., Awaitable[Any]]
