"""Tool registry: a tool is a typed function; its schema comes from the signature and docstring.

Schemas are paid for on every request, so they are kept compact: the first docstring paragraph is the
description, `Args:` lines describe parameters, and nothing else is sent.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import types
import typing
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin, overload

from hermes_engine.errors import MalformedToolArguments, UnknownTool
from hermes_engine.ports.conversation import ToolCall
from hermes_engine.providers.base import ToolSchema


@dataclass
class ToolContext:
    """What a tool may know about the turn it runs in. Injected into any parameter annotated with it."""

    bot: str
    session_id: int
    session_key: str
    person_id: int | None = None
    chat_kind: str = "dm"
    shared_scope: str | None = None  # key of the group/channel/server for shared memory
    services: dict[str, Any] = field(default_factory=dict)  # memory store, skill library, ...
    in_review: bool = False  # background review: no user-visible side effects


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., Any]
    toolset: str
    context_param: str | None = None

    @property
    def schema(self) -> ToolSchema:
        return ToolSchema(self.name, self.description, self.parameters)

    async def invoke(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        kwargs = dict(arguments)
        if self.context_param:
            kwargs[self.context_param] = ctx
        result = self.func(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


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


@overload
def tool(func: Callable[..., Any], *, name: str | None = None, toolset: str = "core") -> Tool: ...


@overload
def tool(func: None = None, *, name: str | None = None,
         toolset: str = "core") -> Callable[[Callable[..., Any]], Tool]: ...


def tool(func: Callable[..., Any] | None = None, *, name: str | None = None,
         toolset: str = "core") -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function into a `Tool`. Use as `@tool` or `@tool(toolset="memory")`."""

    def build(fn: Callable[..., Any]) -> Tool:
        summary, arg_docs = _parse_docstring(fn.__doc__ or "")
        hints = typing.get_type_hints(fn)
        properties: dict[str, Any] = {}
        required: list[str] = []
        context_param = None
        for pname, param in inspect.signature(fn).parameters.items():
            annotation = hints.get(pname, str)
            if annotation is ToolContext:
                context_param = pname
                continue
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
        return Tool(name or fn.__name__, summary, parameters, fn, toolset, context_param)

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
            result = await t.invoke(arguments, ctx)
        except asyncio.CancelledError:
            raise
        except (UnknownTool, MalformedToolArguments) as exc:
            return ToolResult(str(exc), is_error=True)
        except TypeError as exc:
            return ToolResult(f"Error: bad arguments for {call.name}: {exc}", is_error=True)
        except Exception as exc:  # a tool that raises reports to the model instead of crashing the turn
            return ToolResult(f"Error: {type(exc).__name__}: {exc}", is_error=True)
        if isinstance(result, ToolResult):
            return result
        if isinstance(result, str):
            return ToolResult(result)
        return ToolResult(json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str))


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
